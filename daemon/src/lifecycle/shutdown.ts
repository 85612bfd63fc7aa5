// How stewardd stops, healthy or degraded alike: whatever reacts to the socket going away stops
// first; the SIGTERM decision (kubectl delete vs rolling update, on-term.ts) is made, and drained,
// while still serving; serving stops within the shutdown grace; what the daemon holds is released;
// the state dir's ownership goes last, then the uninstall's after-close step (a purge). close() runs
// once and always resolves, so the process exits whatever failed on the way.

import type { Logger } from 'pino';
import type { OwnerLock } from '../store/owner.js';
import type { RunningDaemon } from '../running-daemon.js';
import { settleWithin } from '../settle-within.js';
import { onTermStep, type TermConfig } from './on-term.js';
import { removeRestartRecord, restartGraceMs, writeRestartRecord } from './restart-record.js';

export interface ShutdownSteps {
  cfg: TermConfig & { shutdownGraceMs: number; restartGraceMs: number | undefined };
  log: Logger;
  owner: OwnerLock;
  /** Before anything else: stop what would react to the socket closing (readiness, self-checks). */
  quiesce?: () => void;
  /** Stop serving; raced against the shutdown grace. */
  stopServing: () => Promise<unknown>;
  /** Release what the daemon holds once it no longer serves (scheduler, plugins, journal). */
  release?: () => Promise<void>;
  /**
   * Why the journal still owes work no drain could see (start-up recovery stopped before it was
   * done), if it does: an uninstall then keeps the state dir, so a reinstall finishes that work.
   */
  unfinished?: () => string | undefined;
}

export function shutdownSequence(s: ShutdownSteps): RunningDaemon {
  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let closing: Promise<void> | undefined;
  const close = (reason: string): Promise<void> => {
    closing ??= (async () => {
      // SIGTERM is a planned end (a rolling update, a drain, a restart by its owner): the restart
      // record says so before readiness drops, covering the decision and the drain below, then the
      // successor's grace from the moment serving stops.
      const graceMs = reason === 'SIGTERM' ? restartGraceMs(s.cfg.restartGraceMs, s.cfg.stateDir) : 0;
      const planned = graceMs > 0;
      if (planned)
        writeRestartRecord(
          s.cfg.socket,
          Date.now() + (s.cfg.api?.timeoutMs ?? 0) + s.cfg.shutdownGraceMs + graceMs,
          s.log,
        );
      s.quiesce?.();
      s.log.info({ reason }, 'stewardd shutting down');
      // kubectl delete vs rolling update: decided (and drained) while still serving. A degraded
      // daemon decides the same way (seed 001): the uninstall goes on without an unreadable journal.
      // No successor comes after an uninstall: the record goes as soon as that is decided, so the
      // drain's refusals of ADD reach the runtime as they are.
      const { uninstalling, afterClose } = await onTermStep(s.cfg, reason, s.log, () =>
        removeRestartRecord(s.cfg.socket, s.log),
      );
      // Written again as serving stops: the shim believes a record for at most MAX_RESTART_GRACE_S
      // after it was written, and the decision above may have taken a while.
      if (planned && !uninstalling)
        writeRestartRecord(s.cfg.socket, Date.now() + s.cfg.shutdownGraceMs + graceMs, s.log);
      const stopped = s.stopServing().catch((e: unknown) => {
        s.log.error({ err: (e as Error).message }, 'stopping the server failed; stopping goes on');
      });
      await settleWithin(stopped, s.cfg.shutdownGraceMs);
      if (planned && !uninstalling) writeRestartRecord(s.cfg.socket, Date.now() + graceMs, s.log);
      try {
        await s.release?.();
      } catch (e) {
        s.log.error({ err: (e as Error).message }, 'releasing what stewardd held failed while stopping');
      }
      s.owner.release();
      const owed = s.unfinished?.();
      try {
        if (owed !== undefined && uninstalling)
          s.log.warn(
            { stateDir: s.cfg.stateDir, why: owed },
            'keeping the state dir: the journal still owes teardowns',
          );
        else afterClose();
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
