// A stewardd that cannot start (a journal from a newer release after a rollback, a state dir it
// cannot own, a socket it cannot bind) used to exit at once and crash-loop. A `kubectl delete` of the
// DaemonSet then reached no stewardd, or one in its back-off with no container running, and
// 00-steward.conflist stayed behind: every new pod on the node fails (seed 001). In a cluster (or with
// --uninstall-on-delete always) it now stays up, serving nothing, until a signal: on SIGTERM it makes
// the decision a serving stewardd makes and uninstalls if the DaemonSet is going away, then exits 1.
// The startupProbe (no socket answers it) restarts it meanwhile, every few minutes at most.

import type { Logger } from 'pino';
import { onTermStep, type TermConfig } from './on-term.js';

/** Whether a start that failed waits for SIGTERM: only where a SIGTERM can mean an uninstall. */
export function waitsAfterFailedStart(cfg: Pick<TermConfig, 'api' | 'uninstallOnDelete'>): boolean {
  return cfg.uninstallOnDelete === 'always' || (cfg.uninstallOnDelete === 'auto' && cfg.api !== undefined);
}

/**
 * Waits for SIGTERM or SIGINT (or takes `early`, one that came while starting), then carries out
 * what SIGTERM calls for (on-term.ts: decide, drain what can be drained, remove our files). Never
 * rejects: an uninstall that fails is logged by onTermStep.
 */
export async function afterFailedStart(
  cfg: TermConfig,
  err: unknown,
  early: NodeJS.Signals | undefined,
  log: Logger,
): Promise<void> {
  log.error(
    { err },
    'stewardd could not start; it stays up, serving nothing, until SIGTERM, so that a kubectl delete of its DaemonSet still uninstalls the node',
  );
  const signal =
    early ??
    (await new Promise<NodeJS.Signals>((resolve) => {
      // A signal listener alone does not keep Node's event loop alive: this timer does, until then.
      const alive = setInterval(() => undefined, 2 ** 30);
      const on = (sig: NodeJS.Signals) => {
        clearInterval(alive);
        process.off('SIGTERM', on);
        process.off('SIGINT', on);
        resolve(sig);
      };
      process.on('SIGTERM', on);
      process.on('SIGINT', on);
    }));
  log.info({ signal }, `${signal} after a failed start`);
  const { afterClose } = await onTermStep(cfg, signal, log);
  afterClose();
}
