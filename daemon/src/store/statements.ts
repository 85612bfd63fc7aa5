// Every prepared statement of the journal, in one place: better-sqlite3 prepares each once per
// connection. The SQL of the two tables' queries and updates; store.ts runs them.

import type Database from 'better-sqlite3';
import { ATTACHMENT_COLUMNS, STEP_COLUMNS } from './rows.js';

const SQL = {
  insertAttachment: `INSERT INTO attachments
      (container_id, network, ifname, netns, netns_id, cni_args, cni_path, cni_version, boot_id, state, config,
       pod_namespace, pod_name, pod_uid, created_at, updated_at)
      VALUES (@containerId, @network, @ifname, @netns, @netnsId, @cniArgs, @cniPath, @cniVersion, @bootId, @state,
       @config, @podNamespace, @podName, @podUid, @now, @now)
      RETURNING ${ATTACHMENT_COLUMNS}`,
  currentAttachment: `SELECT ${ATTACHMENT_COLUMNS} FROM attachments
      WHERE container_id = ? AND network = ? AND ifname = ? ORDER BY id DESC LIMIT 1`,
  attachmentById: `SELECT ${ATTACHMENT_COLUMNS} FROM attachments WHERE id = ?`,
  setAttachmentState: `UPDATE attachments SET state = @state, updated_at = @now WHERE id = @id`,
  setAttachmentResult: `UPDATE attachments SET state = 'added', result = @result, error = NULL, updated_at = @now WHERE id = @id`,
  setAttachmentError: `UPDATE attachments SET error = @error, updated_at = @now WHERE id = @id`,
  attachmentsInState: `SELECT ${ATTACHMENT_COLUMNS} FROM attachments WHERE state = ? ORDER BY id`,
  attachmentsOfOtherBoot: `SELECT ${ATTACHMENT_COLUMNS} FROM attachments
      WHERE boot_id != ? AND state IN ('adding', 'added', 'deleting') ORDER BY id`,
  liveAttachmentsOfNetwork: `SELECT ${ATTACHMENT_COLUMNS} FROM attachments
      WHERE network = ? AND state IN ('adding', 'added') ORDER BY id`,
  insertStep: `INSERT INTO steps
      (attachment_id, seq, delegate_index, delegate_name, ifname, plugin_index, plugin_type, config, state, created_at, updated_at)
      VALUES (@attachmentId, @seq, @delegateIndex, @delegateName, @ifname, @pluginIndex, @pluginType, @config, @state, @now, @now)
      RETURNING ${STEP_COLUMNS}`,
  startStep: `UPDATE steps SET state = 'adding', updated_at = @now WHERE id = @id AND state = 'planned'`,
  stepsOf: `SELECT ${STEP_COLUMNS} FROM steps WHERE attachment_id = ? ORDER BY seq`,
  stepById: `SELECT ${STEP_COLUMNS} FROM steps WHERE id = ?`,
  setStepProcess: `UPDATE steps SET plugin_pid = @pid, plugin_start = @startTime, plugin_boot = @bootId,
      plugin_pidns = @pidNamespace WHERE id = @id`,
  runningStepProcesses: `SELECT id, attachment_id, plugin_type, state, plugin_pid, plugin_start, plugin_boot, plugin_pidns
      FROM steps WHERE state IN ('adding', 'deleting') AND plugin_pid IS NOT NULL ORDER BY id`,
  setStepAdded: `UPDATE steps SET state = 'added', result = @result, updated_at = @now WHERE id = @id`,
  setStepState: `UPDATE steps SET state = @state, error = COALESCE(@error, error), updated_at = @now WHERE id = @id`,
  setStepDeleting: `UPDATE steps SET state = 'deleting', teardown_at = COALESCE(teardown_at, @now), updated_at = @now WHERE id = @id`,
  setStepDelFailed: `UPDATE steps SET state = 'del_failed', error = @error, attempts = attempts + 1,
      next_attempt_at = @nextAttemptAt, pending_ms = pending_ms + @pendingMs, updated_at = @now WHERE id = @id`,
  setStepDeleted: `UPDATE steps SET state = 'deleted', attempts = attempts + 1, next_attempt_at = NULL, updated_at = @now WHERE id = @id`,
  setStepAbandoned: `UPDATE steps SET state = 'abandoned', error = @error, next_attempt_at = NULL, updated_at = @now WHERE id = @id`,
  rearmAbandonedSteps: `UPDATE steps SET state = 'del_failed', attempts = 0, pending_ms = 0, next_attempt_at = @dueAt, updated_at = @now
      WHERE attachment_id = @id AND state = 'abandoned'`,
  reopenDeletedAttachment: `UPDATE attachments SET state = 'deleting', updated_at = @now WHERE id = @id AND state = 'deleted'`,
  abandonedAttachmentIds: `SELECT DISTINCT attachment_id AS id FROM steps WHERE state = 'abandoned' ORDER BY attachment_id`,
  countAttachments: `SELECT state, COUNT(*) AS n FROM attachments GROUP BY state`,
  countSteps: `SELECT state, COUNT(*) AS n FROM steps GROUP BY state`,
  pendingTeardownSteps: `SELECT ${STEP_COLUMNS} FROM steps
      WHERE state IN ('del_failed', 'deleting') ORDER BY COALESCE(next_attempt_at, 0), id LIMIT ?`,
  abandonedSteps: `SELECT ${STEP_COLUMNS} FROM steps WHERE state = 'abandoned' ORDER BY id DESC LIMIT ?`,
  oldestPendingTeardown: `SELECT MIN(a.updated_at) AS t FROM attachments a WHERE a.state = 'deleting'`,
  dueAttachments: `SELECT DISTINCT attachment_id AS id FROM steps
      WHERE state = 'del_failed' AND next_attempt_at <= ? ORDER BY attachment_id`,
  clampNextAttempts: `UPDATE steps SET next_attempt_at = @latest, updated_at = @now
      WHERE state = 'del_failed' AND next_attempt_at > @latest`,
  nextDueAt: `SELECT MIN(next_attempt_at) AS t FROM steps WHERE state = 'del_failed'`,
  pruneTombstones: `DELETE FROM attachments WHERE state = 'deleted' AND updated_at < ?
      AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.attachment_id = attachments.id AND s.state = 'abandoned')`,
  pruneAbandoned: `DELETE FROM attachments WHERE state = 'deleted' AND updated_at < ?`,
  countPendingTeardowns: `SELECT COUNT(*) AS n FROM steps WHERE state IN ('del_failed', 'deleting')`,
  unfinishedAttachments: `SELECT id FROM attachments WHERE state = 'adding'
      UNION SELECT attachment_id AS id FROM steps WHERE state = 'deleting' ORDER BY id`,
};

export type Statements = Record<keyof typeof SQL, Database.Statement>;

export function prepareStatements(db: Database.Database): Statements {
  return Object.fromEntries(Object.entries(SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Statements;
}
