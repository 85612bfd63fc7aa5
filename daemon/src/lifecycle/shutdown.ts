// How stewardd stops, healthy or degraded alike: whatever reacts to the socket going away stops
// first; the SIGTERM decision (kubectl delete vs rolling update, on-term.ts) is made, and drained,
// while still serving; serving stops within the shutdown grace; what the daemon holds is released;
// the state dir's ownership goes last, then the uninstall's after-close step (a purge). close() runs
// once and always resolves, so the process exits whatever failed on the way.

import type { Logger } from 'pino';
import type { OwnerLock } from '../store/owner.js';
import type { RunningDaemon } from '../running-daemon.js';
import { onTermStep, type TermConfig } from './on-term.js';

export interface ShutdownSteps {
  cfg: TermConfig & { shutdownGraceMs: number };
  log: Logger;
  owner: OwnerLock;
  /** Before anything else: stop what would react to the socket closing (readiness, self-checks). */
  quiesce?: () => void;
  /** Stop serving; raced against the shutdown grace. */
  stopServing: () => Promise<unknown>;
  /** Release what the daemon holds once it no longer serves (scheduler, plugins, journal). */
  release?: () => Promise<void>;
}

export function shutdownSequence(s: ShutdownSteps): RunningDaemon {
  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let closing: Promise<void> | undefined;
  const close = (reason: string): Promise<void> => {
    closing ??= (async () => {
      s.quiesce?.();
      s.log.info({ reason }, 'stewardd shutting down');
      // kubectl delete vs rolling update: decided (and drained) while still serving. A degraded
      // daemon decides the same way (seed 001): the uninstall goes on without an unreadable journal.
      const afterClose = await onTermStep(s.cfg, reason, s.log);
      const grace = new Promise<void>((r) => setTimeout(r, s.cfg.shutdownGraceMs).unref());
      await Promise.race([s.stopServing(), grace]);
      try {
        await s.release?.();
      } catch (e) {
        s.log.error({ err: (e as Error).message }, 'releasing what stewardd held failed while stopping');
      }
      s.owner.release();
      try {
        afterClose();
      } catch (e) {
        // Never leave close() unresolved: the process must still exit.
        s.log.error({ err: (e as Error).message }, 'purging the state dir after uninstall failed; it stays');
      }
      s.log.info('stewardd stopped');
      resolveClosed();
    })();
    return closing;
  };
  return { close, closed };
}
