// Opening the journal with a start-up check, and the daemon that runs when the check fails.
// PRAGMA quick_check runs before recovery: recovery on a corrupt journal would tear down (or
// leave) the wrong things. A journal that fails it, or will not open as a database at all, makes a
// daemon that serves but is never ready: the reason is in the log, /readyz and /v1/status; ADD and
// CHECK get code 11 with it; DELs are spooled (routes/degraded.ts). The operator restores or moves
// the database aside and restarts; the spooled DELs are then ingested like the shim's.

import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { DaemonConfig } from './config.js';
import type { RunningDaemon } from './running-daemon.js';
import { removeRestartRecord } from './lifecycle/restart-record.js';
import { shutdownSequence } from './lifecycle/shutdown.js';
import { buildDegradedApp } from './server.js';
import { restrictSocket } from './socket.js';
import type { OwnerLock } from './store/owner.js';
import { Store, type StoreOptions } from './store/store.js';
import { VERSION } from './version.js';

export type Journal = { store: Store; checkMs: number } | { corrupt: string; problems: string[] };

function isCorruption(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code.startsWith('SQLITE_NOTADB'));
}

/** Opens the journal and runs its quick_check; a corrupt one is closed again and reported. */
export function openJournal(dbPath: string, opts: StoreOptions = {}): Journal {
  let store: Store;
  try {
    store = new Store(dbPath, opts);
  } catch (e) {
    if (!isCorruption(e)) throw e;
    const msg = (e as Error).message;
    return { corrupt: `the journal database ${dbPath} cannot be opened as a database (${msg})`, problems: [msg] };
  }
  const t0 = performance.now();
  const problems = store.quickCheck();
  const checkMs = performance.now() - t0;
  if (problems.length === 0) return { store, checkMs };
  store.close();
  const more = problems.length > 1 ? ` and ${problems.length - 1} more` : '';
  return { corrupt: `the journal database ${dbPath} is corrupt (PRAGMA quick_check: ${problems[0]}${more})`, problems };
}

/** Serves the degraded routes on the socket until closed; never recovers, never touches the journal. */
export async function startDegraded(
  cfg: DaemonConfig,
  owner: OwnerLock,
  j: { corrupt: string; problems: string[] },
  log: Logger,
  startedAt: number,
): Promise<RunningDaemon> {
  const reason =
    `${j.corrupt}; stewardd is not ready and ran no recovery on it: restore the database or move it aside, ` +
    'then restart (DELs received meanwhile are spooled and ingested then)';
  log.error({ db: cfg.dbPath, problems: j.problems.slice(0, 20) }, reason);
  const app = buildDegradedApp({
    log,
    reason,
    problems: j.problems.slice(0, 20),
    spoolDir: cfg.spoolDir,
    version: VERSION,
    startedAt,
  });
  await app.listen({ path: cfg.socket });
  // The successor of a planned restart answers for itself now, degraded as it is: STATUS reads not
  // ready from here on, not "ready for the grace" (lifecycle/restart-record.ts).
  if (removeRestartRecord(cfg.socket, log)) log.info('restart record removed: this daemon serves (degraded)');
  restrictSocket(cfg.socket);
  log.warn(
    { socket: cfg.socket },
    'stewardd serving, NOT ready: journal unusable; ADD/CHECK answered 11, DELs spooled',
  );
  // Degraded or not, a DaemonSet deleted must not leave its config behind (seed 001).
  return shutdownSequence({ cfg, log, owner, stopServing: () => app.close() });
}
