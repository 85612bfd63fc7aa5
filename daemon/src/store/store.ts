// The only module that imports better-sqlite3 and, with rows.ts, the only one that knows SQL.
// WAL + synchronous=FULL by default: a journal row is on disk before the plugin it describes runs.
// relaxed() commits without an fsync, for the writes recovery does not need synced (docs/architecture.md,
// "Journal durability"). Statements are prepared once; every method is one short synchronous transaction.
// A write that fails (disk full, I/O error, read-only file system) is a CniError with code 11
// (write-error.ts): the request can be retried once the disk is fixed, and nothing half-done is
// assumed committed. Row mapping lives in rows.ts, the prepared statements in statements.ts; what
// remains (~330 lines) is the one Store class callers use, mostly one-line methods over those.

import { namingPath } from './open-error.js';
import Database from 'better-sqlite3';
import { CniError, clip } from '@cni-steward/shared';
import { mkdirSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { retain } from './retain.js';
import { MIGRATIONS } from './migrations.js';
import { ATTACHMENT_COLUMNS, toAttachment, toStep, type Row } from './rows.js';
import { prepareStatements, type Statements } from './statements.js';
import { AuditSightings } from './sightings.js';
import type {
  Attachment,
  AttachmentKey,
  AttachmentState,
  NewAttachment,
  NewStep,
  RunningStep,
  Step,
  StepProcess,
  StepState,
} from './types.js';
import { writeError } from './write-error.js';

/** Error texts are stored (and shown in /v1/status) at most this long. */
const MAX_ERROR_CHARS = 2048;

/** An error text as the store keeps it (capped), so callers can compare a new error with a stored one. */
export function storedErrorText(text: string): string {
  return clip(text, MAX_ERROR_CHARS);
}

export interface StoreOptions {
  now?: () => number;
  /** Called with the driver's error each time a journal write fails (for a metric). */
  onWriteError?: (err: Error) => void;
  /** Called after each committed write with its duration and whether it was synced (for a metric). */
  onCommit?: (seconds: number, synced: boolean) => void;
}

export interface AttachmentFilter {
  containerId?: string | undefined;
  state?: AttachmentState | undefined;
  /** Only this pod's attachments: namespace and name as CNI_ARGS gave them. */
  pod?: { namespace: string; name: string } | undefined;
  limit?: number | undefined;
}

export class Store {
  readonly path: string;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly onWriteError: ((err: Error) => void) | undefined;
  private readonly onCommit: ((seconds: number, synced: boolean) => void) | undefined;
  private readonly stmt: Statements;
  /** The audit's sightings (sightings.ts). */
  readonly sightings: AuditSightings;
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
      this.db.exec('PRAGMA busy_timeout = 5000');
      // After a burst (a DEL storm, a mass GC) the WAL file shrinks back to this size at checkpoint.
      this.db.exec('PRAGMA journal_size_limit = 4194304');
      this.migrate();
    });
    this.stmt = retain(prepareStatements(this.db));
    this.sightings = retain(new AuditSightings(this.db, (fn) => this.atomic(fn)));
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
    if (this.depth > 0) throw new Error('Store.relaxed() inside another transaction');
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
  private write<T>(fn: () => T, synced = true): T {
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
  private cached(sql: string): Database.Statement {
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
    // With a 1 MiB page cache: the check reads every page once, and at the default size SQLite would
    // keep ~16 MiB of them for the daemon's lifetime (RSS 104 -> 88 MiB at 10,000 attachments, the
    // restart row of `npm run bench`), at no cost in time (the OS page cache serves the reads).
    let cacheSize: number | undefined;
    try {
      cacheSize = this.pragmaValue('cache_size') as number;
      this.db.exec('PRAGMA cache_size = -1024');
      const rows = this.cached(`PRAGMA quick_check(${Math.trunc(maxProblems)})`).all() as Array<{
        quick_check: string;
      }>;
      const out = rows.map((r) => r.quick_check);
      return out.length === 1 && out[0] === 'ok' ? [] : out;
    } catch (e) {
      return [(e as Error).message];
    } finally {
      if (cacheSize !== undefined) this.db.exec(`PRAGMA cache_size = ${Math.trunc(cacheSize)}`);
    }
  }

  // ---- attachments

  /** A new attachment, `adding` unless given (a tombstone for a DEL of an unknown attachment is born `deleted`). */
  createAttachment(a: NewAttachment, state: AttachmentState = 'adding'): Attachment {
    const pod = { podNamespace: a.podNamespace ?? null, podName: a.podName ?? null, podUid: a.podUid ?? null };
    return this.write(() =>
      toAttachment(this.stmt.insertAttachment.get({ ...a, ...pod, state, now: this.now() }) as Row),
    );
  }

  /** The newest attachment with this key (older rows are finished tombstones). */
  currentAttachment(key: AttachmentKey): Attachment | undefined {
    const r = this.stmt.currentAttachment.get(key.containerId, key.network, key.ifname) as Row | undefined;
    return r ? toAttachment(r) : undefined;
  }

  getAttachment(id: number): Attachment | undefined {
    const r = this.stmt.attachmentById.get(id) as Row | undefined;
    return r ? toAttachment(r) : undefined;
  }

  setAttachmentState(id: number, state: AttachmentState): void {
    this.write(() => this.stmt.setAttachmentState.run({ id, state, now: this.now() }));
  }

  setAttachmentAdded(id: number, result: string): void {
    this.write(() => this.stmt.setAttachmentResult.run({ id, result, now: this.now() }));
  }

  setAttachmentError(id: number, error: string): void {
    this.write(() => this.stmt.setAttachmentError.run({ id, error: storedErrorText(error), now: this.now() }));
  }

  attachmentsInState(state: AttachmentState): Attachment[] {
    return (this.stmt.attachmentsInState.all(state) as Row[]).map(toAttachment);
  }

  /** Live attachments recorded under a different kernel boot: their netns died with that boot. */
  attachmentsOfOtherBoot(bootId: string): Attachment[] {
    return (this.stmt.attachmentsOfOtherBoot.all(bootId) as Row[]).map(toAttachment);
  }

  liveAttachmentsOfNetwork(network: string): Attachment[] {
    return (this.stmt.liveAttachmentsOfNetwork.all(network) as Row[]).map(toAttachment);
  }

  listAttachments(filter: AttachmentFilter): Attachment[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.containerId !== undefined) {
      where.push('container_id = ?');
      params.push(filter.containerId);
    }
    if (filter.state !== undefined) {
      where.push('state = ?');
      params.push(filter.state);
    }
    if (filter.pod !== undefined) {
      where.push('pod_namespace = ? AND pod_name = ?');
      params.push(filter.pod.namespace, filter.pod.name);
    }
    const sql = `SELECT ${ATTACHMENT_COLUMNS} FROM attachments ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
      ORDER BY id DESC LIMIT ?`;
    params.push(filter.limit ?? 1000);
    return (this.cached(sql).all(...params) as Row[]).map(toAttachment);
  }

  // ---- steps

  /**
   * Journals a step, `adding` unless given (an ADD journals its whole chain at once: the first step
   * `adding`, the rest `planned`); committed (fsync) before the caller runs any of their plugins.
   */
  insertStep(s: NewStep, state: 'adding' | 'planned' = 'adding'): Step {
    return this.write(() => toStep(this.stmt.insertStep.get({ ...s, state, now: this.now() }) as Row));
  }

  /** A `planned` step is about to run its plugin: `adding`. Throws if the step was not `planned`. */
  startStep(id: number): void {
    this.write(() => {
      if (this.stmt.startStep.run({ id, now: this.now() }).changes !== 1)
        throw new Error(`step ${id} is not planned; it cannot be started`);
    });
  }

  getStep(id: number): Step | undefined {
    const r = this.stmt.stepById.get(id) as Row | undefined;
    return r ? toStep(r) : undefined;
  }

  stepsOf(attachmentId: number): Step[] {
    return (this.stmt.stepsOf.all(attachmentId) as Row[]).map(toStep);
  }

  /**
   * Records the process a step's plugin runs as, without an fsync: a commit with synchronous=NORMAL
   * survives the death of this process (the WAL frames are in the kernel's page cache) and is lost
   * only with the kernel (a crash or power loss), which takes the plugin with it. The next FULL
   * commit makes it durable along with everything before it. Never inside atomic(): it is called
   * from the spawner's message, between commits.
   */
  setStepProcess(id: number, p: StepProcess): void {
    this.relaxed(() => this.stmt.setStepProcess.run({ id, ...p }));
  }

  /** Steps journaled as running their plugin (`adding`, `deleting`) with the process it was started as. */
  runningStepProcesses(): RunningStep[] {
    return (this.stmt.runningStepProcesses.all() as Row[]).map((r) => ({
      stepId: r.id as number,
      attachmentId: r.attachment_id as number,
      pluginType: r.plugin_type as string,
      state: r.state as StepState,
      process: {
        pid: r.plugin_pid as number,
        startTime: r.plugin_start as number,
        bootId: (r.plugin_boot as string | null) ?? '',
        pidNamespace: (r.plugin_pidns as string | null) ?? '',
      },
    }));
  }

  setStepAdded(id: number, result: string): void {
    this.write(() => this.stmt.setStepAdded.run({ id, result, now: this.now() }));
  }

  setStepState(id: number, state: StepState, error: string | null = null): void {
    this.write(() =>
      this.stmt.setStepState.run({ id, state, error: error === null ? null : storedErrorText(error), now: this.now() }),
    );
  }

  /** Journals a DEL as started; the first one also stamps when teardown of this step began. */
  setStepDeleting(id: number): void {
    this.write(() => this.stmt.setStepDeleting.run({ id, now: this.now() }));
  }

  setStepDeleted(id: number): void {
    this.write(() => this.stmt.setStepDeleted.run({ id, now: this.now() }));
  }

  /** A failed DEL: next attempt at `nextAttemptAt`, `pendingMs` more time pending (monotonic ms). */
  setStepDelFailed(id: number, error: string, nextAttemptAt: number, pendingMs = 0): void {
    this.write(() =>
      this.stmt.setStepDelFailed.run({
        id,
        error: storedErrorText(error),
        nextAttemptAt,
        pendingMs: Math.max(0, Math.round(pendingMs)),
        now: this.now(),
      }),
    );
  }

  /**
   * Sanity check of the retry schedule against wall-clock steps: no failed step's next attempt is
   * later than `latest` (now plus the backoff cap). Returns how many were pulled in.
   */
  clampNextAttempts(latest: number): number {
    return this.write(() => this.stmt.clampNextAttempts.run({ latest, now: this.now() }).changes);
  }

  setStepAbandoned(id: number, error: string): void {
    this.write(() => this.stmt.setStepAbandoned.run({ id, error: storedErrorText(error), now: this.now() }));
  }

  /**
   * An operator's second chance for an attachment's abandoned steps (`stewardd retry --abandoned`):
   * each becomes a failed step due now with its attempts reset, and a torn-down attachment is
   * `deleting` again, in one commit. Returns how many steps were re-armed. `dueAt` is now on the
   * retry schedule's clock (clock.ts); the journal's wall clock when not given.
   */
  rearmAbandoned(attachmentId: number, dueAt?: number): number {
    return this.atomic(() => {
      const now = this.now();
      const n = this.stmt.rearmAbandonedSteps.run({ id: attachmentId, now, dueAt: dueAt ?? now }).changes;
      if (n > 0) this.stmt.reopenDeletedAttachment.run({ id: attachmentId, now });
      return n;
    });
  }

  abandonedAttachmentIds(): number[] {
    return (this.stmt.abandonedAttachmentIds.all() as Row[]).map((r) => r.id as number);
  }

  // ---- teardown queue

  pendingTeardownSteps(limit = 100_000): Step[] {
    return (this.stmt.pendingTeardownSteps.all(limit) as Row[]).map(toStep);
  }

  abandonedSteps(limit = 100): Step[] {
    return (this.stmt.abandonedSteps.all(limit) as Row[]).map(toStep);
  }

  /** Attachments with a failed teardown step whose next attempt is due at `now`. */
  dueAttachmentIds(now: number): number[] {
    return (this.stmt.dueAttachments.all(now) as Row[]).map((r) => r.id as number);
  }

  /**
   * Attachments whose journal says work was cut off: left `adding`, or with a step left `deleting`.
   * While the daemon runs, that happens when a journal write failed after a plugin ran (disk full);
   * the retry scheduler reclaims them once no request for the container is in its queue.
   */
  unfinishedAttachmentIds(): number[] {
    return (this.stmt.unfinishedAttachments.all() as Row[]).map((r) => r.id as number);
  }

  nextTeardownDueAt(): number | undefined {
    const r = this.stmt.nextDueAt.get() as Row;
    return (r.t as number | null) ?? undefined;
  }

  oldestPendingTeardownAt(): number | undefined {
    const r = this.stmt.oldestPendingTeardown.get() as Row;
    return (r.t as number | null) ?? undefined;
  }

  /**
   * Deletes finished attachments (and, by cascade, their steps) last touched before `before`;
   * those with an abandoned step, which an operator must see, only when older than `abandonedBefore`.
   */
  pruneTombstones(before: number, abandonedBefore: number): number {
    return this.atomic(
      () => this.stmt.pruneTombstones.run(before).changes + this.stmt.pruneAbandoned.run(abandonedBefore).changes,
    );
  }

  countPendingTeardowns(): number {
    return (this.stmt.countPendingTeardowns.get() as Row).n as number;
  }

  counts(): { attachments: Record<string, number>; steps: Record<string, number> } {
    const fold = (rows: Row[]) => Object.fromEntries(rows.map((r) => [r.state as string, r.n as number]));
    return {
      attachments: fold(this.stmt.countAttachments.all() as Row[]),
      steps: fold(this.stmt.countSteps.all() as Row[]),
    };
  }
}
