// A stewardd that cannot start (a journal from a newer release after a rollback, a journal or socket
// path it cannot use) used to exit at once and crash-loop. A `kubectl delete` of the DaemonSet then
// reached no stewardd, or one in its back-off with no container running, and 00-steward.conflist
// stayed behind: every new pod on the node fails (seed 001). In a cluster it now stays up, serving
// nothing, until a signal: on SIGTERM it makes the decision a serving stewardd makes and uninstalls if
// the DaemonSet is going away, then exits 1. The startupProbe (no socket answers it) restarts it
// meanwhile, about every 10 minutes. Only a failure before anything of the daemon ran waits
// (FailedBeforeServing); any other exits at once, as before.

import type { Logger } from 'pino';
import { onTermStep, type TermConfig } from './on-term.js';

/**
 * A start that failed before anything of the daemon ran (daemon.ts: the socket path and the journal,
 * the state dir's ownership released again): the only failure that waits. A later one may leave a
 * spawner, a listener or a recovery running; a state dir another live stewardd owns is that
 * stewardd's to uninstall, not this one's.
 */
export class FailedBeforeServing extends Error {
  constructor(readonly failure: unknown) {
    super(failure instanceof Error ? failure.message : String(failure));
  }
}

/**
 * Whether a start that failed waits for SIGTERM: only one that failed before serving, and only
 * where a SIGTERM can mean an uninstall.
 */
export function waitsAfterFailedStart(err: unknown, cfg: Pick<TermConfig, 'api' | 'uninstallOnDelete'>): boolean {
  // In a cluster only: there a startupProbe restarts the waiting container; under podman or systemd
  // (--uninstall-on-delete always, no probes) it would wait forever where an exit lets it be restarted.
  return err instanceof FailedBeforeServing && cfg.api !== undefined && cfg.uninstallOnDelete !== 'never';
}

/**
 * Waits for SIGTERM or SIGINT (or takes `early`, one that came while starting), then carries out
 * what SIGTERM calls for (on-term.ts: decide, drain what can be drained, remove our files); further
 * signals meanwhile are logged and ignored, so the uninstall is not cut in half. Never rejects: an
 * uninstall that fails is logged by onTermStep.
 */
export async function afterFailedStart(
  cfg: TermConfig,
  err: FailedBeforeServing,
  early: NodeJS.Signals | undefined,
  log: Logger,
): Promise<void> {
  log.error(
    { err: err.failure },
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
  const ignored = (sig: NodeJS.Signals) =>
    log.warn({ signal: sig }, `${sig} ignored: the first signal is being carried out`);
  process.on('SIGTERM', ignored);
  process.on('SIGINT', ignored);
  log.info({ signal }, `${signal} after a failed start`);
  const { afterClose } = await onTermStep(cfg, signal, log);
  afterClose();
}
