// The journal's database itself: opened (WAL, synchronous=FULL, foreign keys, a busy timeout),
// brought to the schema's version (migrations.ts), its transactions (atomic: one synced commit;
// relaxed: one commit without an fsync, for the writes recovery does not need synced, see
// docs/architecture.md "Journal durability"), and the probes health and readiness ask (a real
// write, the room left, quick_check). A write that fails (disk full, I/O error, read-only file
// system) is a CniError with code 11 (write-error.ts): the request can be retried once the disk is
// fixed, and nothing half-done is assumed committed. store.ts builds the journal's records on it.

import Database from 'better-sqlite3';
import { CniError } from '@cni-steward/shared';
import { mkdirSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { MIGRATIONS } from './migrations.js';
import { namingPath } from './open-error.js';
import { retain } from './retain.js';
import { prepareStatements, type Statements } from './statements.js';
import { writeError } from './write-error.js';

/**
 * The connection's page cache (KiB): SQLite's own default. better-sqlite3 builds SQLite with 16 MiB,
 * which start-up's scans of a large journal (the quick check, the other boot's attachments) filled
 * and kept for the daemon's life: +8 MiB of RSS at 10,000 attachments (the restart row of `npm run
 * bench`). The OS page cache still holds the file; a miss costs a read, not a disk seek.
 */
export const PAGE_CACHE_KIB = 2048;

/** How long a journal statement waits for another process's lock, the event loop blocked meanwhile. */
export const BUSY_TIMEOUT_MS = 250;

export interface StoreOptions {
  now?: () => number;
  /** Called with the driver's error each time a journal write fails (for a metric). */
  onWriteError?: (err: Error) => void;
  /** Called after each committed write with its duration and whether it was synced (for a metric). */
  onCommit?: (seconds: number, synced: boolean) => void;
}

export class JournalDatabase {
  readonly path: string;
  protected readonly db: Database.Database;
  protected readonly now: () => number;
  private readonly onWriteError: ((err: Error) => void) | undefined;
  private readonly onCommit: ((seconds: number, synced: boolean) => void) | undefined;
  protected readonly stmt: Statements;
  /** Statements of SQL built at run time (pragmas, attachment filters), prepared once each. */
  private readonly statements = new Map<string, Database.Statement>();
  /** Nesting depth of atomic(): a failure inside is translated once, at the outermost level. */
  private depth = 0;

  constructor(path: string, opts: StoreOptions | (() => number) = {}) {
    const o = typeof opts === 'function' ? { now: opts } : opts;
    this.path = path;
    this.now = o.now ?? Date.now;
    this.onWriteError = o.onWriteError;
    this.onCommit = o.onCommit;
    // Every failure to open names the path and the cause (a read-only state dir said only "attempt
    // to write a readonly database"); the driver's `code` is kept (degraded.ts reads it).
    if (path !== ':memory:')
      namingPath('create the journal directory', dirname(path), () =>
        mkdirSync(dirname(path), { recursive: true, mode: 0o700 }),
      );
    // Retained, and pragmas set with exec: see retain.ts (Node 24 aborts on a collected better-sqlite3 object).
    this.db = namingPath('open the journal database', path, () => retain(new Database(path)));
    namingPath('open the journal database', path, () => {
      this.db.exec('PRAGMA journal_mode = WAL');
      this.db.exec('PRAGMA synchronous = FULL');
      this.db.exec('PRAGMA foreign_keys = ON');
      // After a burst (a DEL storm, a mass GC) the WAL file shrinks back to this size at checkpoint.
      this.db.exec('PRAGMA journal_size_limit = 4194304');
      this.db.exec(`PRAGMA cache_size = -${PAGE_CACHE_KIB}`);
      this.migrate();
      // Opened and migrated with better-sqlite3's 5 s wait (nothing is served yet); from here on
      // it waits with the event loop blocked, and another process holding the journal (an operator's
      // `sqlite3` in a transaction) stalled every request and STATUS 5 s a write. A write refused
      // busy answers 11 at once instead (write-error.ts).
      this.db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    });
    this.stmt = retain(prepareStatements(this.db));
  }

  private migrate(): void {
    const current = this.pragmaValue('user_version') as number;
    if (current > MIGRATIONS.length) {
      this.db.close();
      throw new Error(
        `database ${this.path} has schema version ${current}, newer than this stewardd (${MIGRATIONS.length})`,
      );
    }
    for (let v = current; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v] as string);
        this.db.exec(`PRAGMA user_version = ${v + 1}`);
      })();
    }
  }

  /**
   * Runs `fn` as one transaction: one commit (one fsync) for several journal writes that must be
   * on disk together. `fn` must be synchronous: never run a plugin inside it.
   */
  atomic<T>(fn: () => T): T {
    return this.write(this.db.transaction(fn));
  }

  /**
   * Runs `fn` as one transaction committed with synchronous=NORMAL: no fsync. The commit is in the
   * WAL file (the kernel's page cache) when this returns, so it survives the death of this process
   * (kill -9, OOM, a crash); it can be lost only with the kernel (a kernel crash, a power loss), and
   * then only with every commit after it: the WAL is replayed up to its first torn frame, and the
   * next synced commit makes it durable along with everything before it. Only for writes whose loss
   * with the kernel recovery already handles: after a reboot, every live attachment of the old boot
   * is torn down from its last synced state (docs/architecture.md, "Journal durability"). Never
   * inside atomic() (the setting applies to the outermost commit).
   */
  relaxed<T>(fn: () => T): T {
    if (this.depth > 0) throw new Error('relaxed() inside another transaction');
    return this.write(() => {
      this.db.exec('PRAGMA synchronous = NORMAL');
      try {
        return this.db.transaction(fn)();
      } finally {
        this.db.exec('PRAGMA synchronous = FULL');
      }
    }, false);
  }

  /** Runs a write; a driver failure becomes code 11 (and is reported once). The outermost is timed. */
  protected write<T>(fn: () => T, synced = true): T {
    const t0 = this.depth === 0 && this.onCommit ? performance.now() : undefined;
    this.depth++;
    try {
      const out = fn();
      if (t0 !== undefined) this.onCommit?.((performance.now() - t0) / 1000, synced);
      return out;
    } catch (e) {
      if (this.depth > 1 || e instanceof CniError) throw e;
      this.onWriteError?.(e as Error);
      throw writeError(e as Error & { code?: string });
    } finally {
      this.depth--;
    }
  }

  /** How the journal is made durable, read back from SQLite (tests pin it: FULL, WAL). */
  durability(): { journalMode: string; synchronous: number } {
    return {
      journalMode: this.pragmaValue('journal_mode') as string,
      synchronous: this.pragmaValue('synchronous') as number,
    };
  }

  get schemaVersion(): number {
    return this.pragmaValue('user_version') as number;
  }

  /** A statement prepared once per SQL text and kept (retain.ts). */
  protected cached(sql: string): Database.Statement {
    let st = this.statements.get(sql);
    if (st === undefined) {
      st = retain(this.db.prepare(sql));
      this.statements.set(sql, st);
    }
    return st;
  }

  /** The value of a read-only pragma, e.g. user_version. */
  private pragmaValue(name: string): unknown {
    return this.cached(`PRAGMA ${name}`).pluck().get();
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /** The file's pages: their size, how many, how many free (what the database-size benchmark reports). */
  pageStats(): { pageSize: number; pageCount: number; freelist: number } {
    return {
      pageSize: Number(this.pragmaValue('page_size')),
      pageCount: Number(this.pragmaValue('page_count')),
      freelist: Number(this.pragmaValue('freelist_count')),
    };
  }

  /** PRAGMA integrity_check (quick_check plus every index cross-checked): [] when "ok". Slower; for comparison. */
  integrityCheck(maxProblems = 20): string[] {
    const rows = this.cached(`PRAGMA integrity_check(${Math.trunc(maxProblems)})`).all() as Array<{
      integrity_check: string;
    }>;
    const out = rows.map((r) => r.integrity_check);
    return out.length === 1 && out[0] === 'ok' ? [] : out;
  }

  // ---- health (additive: probes that need no schema of their own)

  /**
   * Whether the journal can be written now, and will be for the next burst of writes: one real,
   * fsync'd commit that needs no table (the header's user_version rewritten with its own value,
   * which dirties page 1), and at least `minFreeBytes` free on the filesystem that holds the
   * database. The commit alone is not enough: in WAL mode SQLite reuses the WAL frames it has
   * already allocated, so a probe commit succeeds on a full filesystem while the next ADDs, which
   * need the WAL (or the database, at checkpoint) to grow, fail with SQLITE_FULL.
   * Returns undefined when healthy, else why not.
   */
  writeProbe(minFreeBytes: number): string | undefined {
    try {
      const v = this.pragmaValue('user_version') as number;
      this.db.transaction(() => this.db.exec(`PRAGMA user_version = ${v}`)).immediate();
    } catch (e) {
      return `the database ${this.path} cannot be written: ${(e as Error).message}`;
    }
    if (this.path === ':memory:') return undefined;
    try {
      const fs = statfsSync(dirname(this.path));
      const free = fs.bavail * fs.bsize;
      if (free < minFreeBytes) {
        return `the filesystem holding ${this.path} has ${free} bytes free, less than the ${minFreeBytes} the journal needs to keep writing`;
      }
    } catch (e) {
      return `cannot tell how much room is left for ${this.path}: ${(e as Error).message}`;
    }
    return undefined;
  }

  /**
   * PRAGMA quick_check: O(N) structural check of every page, without the index cross-checks of
   * integrity_check. Returns the problems found ([] when "ok"); a database too damaged to check
   * at all yields the error as its one problem.
   */
  quickCheck(maxProblems = 20): string[] {
    try {
      const rows = this.cached(`PRAGMA quick_check(${Math.trunc(maxProblems)})`).all() as Array<{
        quick_check: string;
      }>;
      const out = rows.map((r) => r.quick_check);
      return out.length === 1 && out[0] === 'ok' ? [] : out;
    } catch (e) {
      return [(e as Error).message];
    }
  }
}
