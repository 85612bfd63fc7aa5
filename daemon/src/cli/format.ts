// Short human tables for the CLI, made from the API's JSON (routes/status.ts shapes). Pure
// functions of (json, now): what an operator reads at 3 a.m., one row per thing.

import { printable } from '@cni-steward/shared';
import type { RuntimeInfo } from '../audit/runtime.js';

export interface TeardownRow {
  step: number;
  attachment: number;
  containerId?: string;
  podNamespace: string | null;
  podName: string | null;
  plugin: string;
  delegate: string;
  ifname: string;
  state: string;
  attempts: number;
  lastError: string | null;
  nextAttemptAt: string | null;
  failingSince: string | null;
}

export interface AttachmentRow {
  id: number;
  containerId: string;
  podNamespace: string | null;
  podName: string | null;
  network: string;
  ifname: string;
  state: string;
  error: string | null;
  updatedAt: string;
  steps: Array<{ plugin: string; state: string; attempts: number }>;
}

export interface StatusJson {
  version: string;
  uptimeSeconds: number;
  ready: boolean;
  problems?: string[];
  attachments: Record<string, number>;
  steps: Record<string, number>;
  teardownQueue: { depth: number; oldestPendingSeconds: number | null; nextAttemptAt: string | null };
  executions: { slots: number; inUse: number; queued: number };
  lastErrors: TeardownRow[];
  /** When CNI STATUS last answered not ready, and why (absent: never since the node's /run was made). */
  statusNotReady?: { at: string; why: string; reason: string; from: string };
  /** With --cni-conf-dir: the conflist's version and whether the runtime asks STATUS. */
  conflist?: { cniVersion: string | null; summary: string };
}

/** Columns padded to their widest cell; the last column is not padded. Cells are made printable. */
export function table(header: string[], raw: string[][]): string {
  const rows = raw.map((r) => r.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

/** "18:40:01Z (in 3s)" or "(overdue 2s)": the time of day and how far from now. */
export function when(iso: string | null, now: number): string {
  if (iso === null) return '-';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const delta = (t - now) / 1000;
  const rel = delta >= 0 ? `in ${duration(delta)}` : `overdue ${duration(-delta)}`;
  return `${iso.slice(11, 19)}Z (${rel})`;
}

/** "namespace/name", the name alone (podman passes only K8S_POD_NAME), or "-" (also from a daemon older than the pod fields). */
export function pod(r: { podNamespace?: string | null; podName?: string | null }): string {
  if (r.podName == null) return '-';
  return r.podNamespace == null ? r.podName : `${r.podNamespace}/${r.podName}`;
}

const shortId = (id: string | undefined) => (id === undefined ? '?' : id.length > 12 ? id.slice(0, 12) : id);
const clip = (s: string | null, n = 70) =>
  (s === null ? '-' : s.length > n ? `${s.slice(0, n - 1)}…` : s).replace(/\s+/g, ' ');
const counts = (c: Record<string, number>) =>
  Object.entries(c)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || 'none';

export function teardownTable(rows: TeardownRow[], now: number): string {
  return table(
    ['STEP', 'POD', 'CONTAINER', 'PLUGIN', 'STATE', 'ATTEMPTS', 'NEXT RETRY', 'LAST ERROR'],
    rows.map((r) => [
      String(r.step),
      pod(r),
      shortId(r.containerId),
      r.plugin,
      r.state,
      String(r.attempts),
      r.state === 'abandoned' ? 'never (abandoned)' : when(r.nextAttemptAt, now),
      clip(r.lastError),
    ]),
  );
}

/** What a degraded stewardd's /v1/status says (routes/degraded.ts): its journal failed its start-up check. */
export interface DegradedStatusJson {
  version: string;
  uptimeSeconds: number;
  ready: false;
  reason: string;
  journalProblems?: string[];
}

export function isDegradedStatus(s: StatusJson | DegradedStatusJson): s is DegradedStatusJson {
  return (
    typeof (s as Partial<DegradedStatusJson>).reason === 'string' && (s as Partial<StatusJson>).steps === undefined
  );
}

export function formatDegradedStatus(s: DegradedStatusJson): string {
  const lines = [
    `stewardd ${printable(s.version)}, up ${duration(s.uptimeSeconds)}, NOT READY (degraded: serving DELs to its spool only)`,
    `not ready:    ${printable(s.reason)}`,
  ];
  for (const p of (s.journalProblems ?? []).slice(0, 10)) lines.push(`journal:      ${printable(p)}`);
  lines.push('teardowns:    unknown (the journal cannot be read)');
  return lines.join('\n');
}

export function formatStatus(s: StatusJson, now: number): string {
  const q = s.teardownQueue;
  const abandoned = s.steps.abandoned ?? 0;
  const lines = [
    `stewardd ${s.version}, up ${duration(s.uptimeSeconds)}, ${s.ready ? 'ready' : 'NOT READY'}`,
    `attachments:  ${counts(s.attachments)}`,
    `teardowns:    ${q.depth} pending${q.oldestPendingSeconds === null ? '' : ` (oldest ${duration(q.oldestPendingSeconds)})`}, ` +
      `${abandoned} abandoned${q.nextAttemptAt === null ? '' : `, next retry ${when(q.nextAttemptAt, now)}`}`,
    `plugin slots: ${s.executions.inUse}/${s.executions.slots} in use, ${s.executions.queued} queued`,
  ];
  for (const p of s.problems ?? []) lines.push(`not ready:    ${printable(p)}`);
  if (s.conflist !== undefined) lines.push(printable(`conflist:     ${s.conflist.summary}`));
  if (s.statusNotReady !== undefined) {
    const n = s.statusNotReady;
    lines.push(
      printable(`STATUS:       last not ready ${when(n.at, now)}, ${n.why} (answered by ${n.from}: ${n.reason})`),
    );
  }
  if (s.lastErrors.length > 0) lines.push('', teardownTable(s.lastErrors, now));
  const shown = s.lastErrors.length;
  if (shown < q.depth + abandoned)
    lines.push(`(${shown} of ${q.depth + abandoned} shown: stewardd teardowns lists them all)`);
  if (abandoned > 0)
    lines.push('', `${abandoned} abandoned step(s): release what they hold by hand, see docs/teardown.md`);
  return lines.join('\n');
}

export function formatTeardowns(t: { pending: TeardownRow[]; abandoned: TeardownRow[] }, now: number): string {
  const rows = [...t.pending, ...t.abandoned];
  if (rows.length === 0) return 'no pending or abandoned teardowns';
  return `${t.pending.length} pending, ${t.abandoned.length} abandoned\n${teardownTable(rows, now)}`;
}

export function formatAttachments(rows: AttachmentRow[]): string {
  if (rows.length === 0) return 'no attachments match';
  return table(
    ['ID', 'POD', 'CONTAINER', 'NETWORK', 'IFNAME', 'STATE', 'STEPS', 'UPDATED'],
    rows.map((a) => [
      String(a.id),
      pod(a),
      shortId(a.containerId),
      a.network,
      a.ifname,
      a.state,
      a.steps.map((s) => `${s.plugin}:${s.state}${s.attempts > 1 ? `×${s.attempts}` : ''}`).join(' ') || '-',
      a.updatedAt.replace(/\.\d+Z$/, 'Z'),
    ]),
  );
}

export interface AuditJson {
  orphans: Array<{
    kind: string;
    containerId: string;
    network: string;
    ifname: string;
    ip: string | null;
    path: string;
    ageSeconds: number | null;
    journalled: boolean;
    /** decide.ts's verdict and why it was released or not (docs/audit.md lists each). */
    verdict: string;
    released: boolean;
    reason: string;
  }>;
  runtime: RuntimeInfo;
  reportOnly?: string;
  deadlineReached?: boolean;
  node?: { namespaces: number; unread: string[] } | { error: string };
}

export function formatAudit(a: AuditJson): string {
  const rt = a.runtime;
  const where = rt.endpoint === null ? '' : ` ${rt.endpoint}`;
  const why = rt.message ? `: ${rt.message}` : '';
  const runtime = rt.reachable
    ? `runtime: ${rt.endpoint ?? '?'} (${rt.sandboxes ?? 0} sandboxes)`
    : rt.lostDuringPass
      ? `runtime: LOST DURING THE PASS${where}${why}; nothing was released after that, the rest only reported`
      : `runtime: UNREACHABLE${where}${why}; every finding is owner-unknown and nothing was released`;
  const lines = [runtime];
  if (rt.distrusted !== undefined) lines.push(`runtime NOT TRUSTED this pass: ${rt.distrusted}; report only`);
  else if (a.reportOnly !== undefined) lines.push(`releases stopped: ${a.reportOnly}`);
  if (a.node !== undefined)
    lines.push(
      'error' in a.node
        ? `node addresses: not read (${a.node.error}); only findings orphaned for the whole grace are released`
        : a.node.unread.length > 0
          ? `node addresses: ${a.node.namespaces} network namespaces read, ${a.node.unread.length} not (${a.node.unread.slice(0, 3).join(', ')}); only findings orphaned for the whole grace are released`
          : `node addresses: ${a.node.namespaces} network namespaces read`,
    );
  const head = lines.map(printable).join('\n');
  if (a.orphans.length === 0)
    return `${head}
no orphans`;
  const rows = a.orphans.map((o) => [
    o.kind,
    o.containerId.slice(0, 13),
    o.network,
    o.ifname,
    o.ip ?? '',
    o.ageSeconds === null ? '' : duration(o.ageSeconds),
    o.journalled ? 'yes' : 'no',
    o.verdict,
    o.released ? 'yes' : 'no',
    o.path,
  ]);
  return `${head}\n${table(['KIND', 'CONTAINER', 'NETWORK', 'IFNAME', 'IP', 'AGE', 'JOURNALLED', 'VERDICT', 'RELEASED', 'PATH'], rows)}`;
}

/** Made printable for the terminal (shared/src/printable.ts). */
export { printable };

/** What JSON leaves raw that printable() escapes: DEL and the C1 controls, and bidirectional overrides. */
const RAW_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `-o json`: the same JSON, with what printable() escapes written as JSON escapes (`\u202e`), so a
 * plugin's error never reaches the terminal raw. JSON.stringify escapes only the C0 controls, and
 * these can only stand inside strings, where an escape is the same text.
 */
export function printableJson(text: string): string {
  return text.replace(RAW_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
