// The journal as callers use it: attachments, their steps, the teardown queue and the counts the
// views show, each a method over one prepared statement (statements.ts) in one short synchronous
// transaction, rows mapped by rows.ts. A journal row is on disk before the plugin it describes runs
// (the database's transactions, database.ts). SQL lives in store/ only: the schema in migrations.ts,
// the statements in statements.ts, run-time SQL (pragmas, attachment filters) in database.ts and
// here, the audit's sightings in sightings.ts, the state dir's ownership lock in owner.ts.

import { clip } from '@cni-steward/shared';
import { JournalDatabase, type StoreOptions } from './database.js';
import { retain } from './retain.js';
import { ATTACHMENT_COLUMNS, toAttachment, toStep, type Row } from './rows.js';
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

export type { StoreOptions } from './database.js';

/** Error texts are stored (and shown in /v1/status) at most this long. */
const MAX_ERROR_CHARS = 2048;

/** An error text as the store keeps it (capped), so callers can compare a new error with a stored one. */
export function storedErrorText(text: string): string {
  return clip(text, MAX_ERROR_CHARS);
}

export interface AttachmentFilter {
  containerId?: string | undefined;
  state?: AttachmentState | undefined;
  /** Only this pod's attachments: namespace and name as CNI_ARGS gave them. */
  pod?: { namespace: string; name: string } | undefined;
  limit?: number | undefined;
}

export class Store extends JournalDatabase {
  /** The audit's sightings (sightings.ts). */
  readonly sightings: AuditSightings;

  constructor(path: string, opts: StoreOptions | (() => number) = {}) {
    super(path, opts);
    this.sightings = retain(new AuditSightings(this.db, (fn) => this.atomic(fn)));
  }

  // ---- attachments

  /** A new attachment, `adding` unless given (a tombstone for a DEL of an unknown attachment is born `deleted`). */
  createAttachment(a: NewAttachment, state: AttachmentState = 'adding'): Attachment {
    const optional = {
      podNamespace: a.podNamespace ?? null,
      podName: a.podName ?? null,
      podUid: a.podUid ?? null,
      netnsId: a.netnsId ?? null,
    };
    return this.write(() =>
      toAttachment(this.stmt.insertAttachment.get({ ...a, ...optional, state, now: this.now() }) as Row),
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
