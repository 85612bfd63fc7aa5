// State-dir ownership: one stewardd process owns a state dir (and the directory of its database).
// The lock is SQLite's own file lock (POSIX fcntl, released by the kernel when the process dies,
// whatever way it dies) on a dedicated file, <dir>/stewardd.lock, opened in EXCLUSIVE locking
// mode: the first write takes the exclusive lock and the connection keeps it until it is closed.
// No other process can even read that file meanwhile, so who holds it is written, after the lock
// is held, to a side file beside it (<dir>/stewardd.owner.json): pid, process start time, socket.
// A process that fails to get the lock writes nothing at all: it only reads the side file to name
// the holder in its error. The side file is never trusted for the decision itself.

import { PathError, namingPath } from './open-error.js';
import Database from 'better-sqlite3';
import { retain } from './retain.js';
import { mkdirSync, readFileSync, readlinkSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const OWNER_LOCK_FILE = 'stewardd.lock';
export const OWNER_INFO_FILE = 'stewardd.owner.json';

/** Who owns a state dir, as the owner wrote it once it held the lock. */
export interface Owner {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: clock ticks after boot; tells a reused pid from the owner. */
  procStart?: string | undefined;
  /** Wall-clock start of the owning process (ISO). */
  startedAt: string;
  /** When it took the lock (ISO). */
  since: string;
  socket: string;
  stateDir: string;
  /** /proc/self/ns/pid of the owner: its pid means nothing in another PID namespace (another container). */
  pidns?: string | undefined;
}

export class StateDirBusyError extends Error {
  constructor(
    readonly dir: string,
    readonly owner: Owner | undefined,
  ) {
    super(
      `state dir ${dir} is owned by another stewardd (${describeOwner(owner)}); ` +
        'one daemon owns a state dir and its database: stop that one first, or give this one another --state-dir',
    );
  }
}

function procStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function pidns(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

export function describeOwner(o: Owner | undefined): string {
  if (!o) return 'a process that has not written its name yet';
  if (o.pidns !== undefined && o.pidns !== pidns()) {
    return `pid ${o.pid} in another PID namespace (another container?), started ${o.startedAt}, owner since ${o.since}, serving ${o.socket}`;
  }
  const live = procStart(o.pid);
  const stale = live === undefined || (o.procStart !== undefined && live !== o.procStart);
  return (
    `pid ${o.pid}, started ${o.startedAt}, owner since ${o.since}, serving ${o.socket}` +
    (stale
      ? `; that pid is no longer that process, so the owner file is stale and the lock holder did not write its own yet`
      : '')
  );
}

function readOwner(dir: string): Owner | undefined {
  try {
    const o = JSON.parse(readFileSync(join(dir, OWNER_INFO_FILE), 'utf8')) as Owner;
    return Number.isInteger(o.pid) ? o : undefined;
  } catch {
    return undefined;
  }
}

function isBusy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

export interface OwnerLock {
  readonly dirs: readonly string[];
  /** Closes the lock connections: the kernel drops the locks. The side files stay (harmless). */
  release(): void;
}

/** Locks one dir, or throws StateDirBusyError naming its owner. Creates the dir (0700) if missing. */
function lockDir(dir: string, info: Omit<Owner, 'stateDir'> & { stateDir: string }): Database.Database {
  const lockPath = join(dir, OWNER_LOCK_FILE);
  namingPath('create the state directory', dir, () => mkdirSync(dir, { recursive: true, mode: 0o700 }));
  const db = namingPath('open the owner lock', lockPath, () => retain(new Database(lockPath, { timeout: 0 }))); // retain.ts
  try {
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    // A write (in a rollback journal, not WAL: WAL ignores exclusive mode for readers on the
    // shm) takes the EXCLUSIVE lock, and exclusive mode keeps it after the commit.
    db.exec('PRAGMA journal_mode = DELETE');
    db.exec('CREATE TABLE IF NOT EXISTS owner (pid INTEGER)');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('DELETE FROM owner');
    db.exec(`INSERT INTO owner (pid) VALUES (${Math.trunc(info.pid)})`);
    db.exec('COMMIT');
  } catch (e) {
    db.close();
    if (isBusy(e)) throw new StateDirBusyError(dir, readOwner(dir));
    throw new PathError('take the owner lock', lockPath, e);
  }
  const tmp = join(dir, `.${OWNER_INFO_FILE}.${process.pid}`);
  namingPath('write the owner file', tmp, () => {
    writeFileSync(tmp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
    renameSync(tmp, join(dir, OWNER_INFO_FILE));
  });
  return db;
}

/**
 * Takes ownership of every dir given (deduplicated, in order): the state dir and, when --db
 * points elsewhere, the database's dir. All or nothing: on a busy dir, the ones already taken are
 * released and StateDirBusyError is thrown. Synchronous; call it before opening the database.
 */
export function takeOwnership(dirs: readonly string[], socket: string): OwnerLock {
  const unique = [...new Set(dirs)];
  const now = new Date();
  const base = {
    pid: process.pid,
    procStart: procStart(process.pid),
    startedAt: new Date(now.getTime() - process.uptime() * 1000).toISOString(),
    since: now.toISOString(),
    socket,
    pidns: pidns(),
  };
  const held: Database.Database[] = [];
  try {
    for (const dir of unique) held.push(lockDir(dir, { ...base, stateDir: unique[0] as string }));
  } catch (e) {
    for (const db of held) db.close();
    throw e;
  }
  let released = false;
  return {
    dirs: unique,
    release() {
      if (released) return;
      released = true;
      for (const db of held) if (db.open) db.close();
    },
  };
}
