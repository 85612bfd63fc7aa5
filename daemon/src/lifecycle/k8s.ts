// Asking the Kubernetes API whether this daemon's own DaemonSet still exists, with the pod's
// service-account token and CA (in-cluster config). undici is the daemon's HTTP client, loaded only when asked.

import { readFileSync } from 'node:fs';

export interface ApiAccess {
  /** https://host:port of the API server. */
  server: string;
  tokenFile: string;
  caFile: string;
  namespace: string;
  daemonSet: string;
  timeoutMs: number;
}

export type DaemonSetState =
  | { kind: 'present' }
  | { kind: 'deleting'; deletionTimestamp: string }
  | { kind: 'absent' }
  | { kind: 'unknown'; why: string };

export async function daemonSetState(a: ApiAccess): Promise<DaemonSetState> {
  let token: string;
  let ca: string;
  try {
    token = readFileSync(a.tokenFile, 'utf8').trim();
    ca = readFileSync(a.caFile, 'utf8');
  } catch (e) {
    return { kind: 'unknown', why: `cannot read service-account credentials: ${(e as Error).message}` };
  }
  // Loaded here, at SIGTERM, not at start: imported, undici adds ~25 MiB to every daemon's RSS.
  const { Agent, request } = await import('undici');
  const path = `/apis/apps/v1/namespaces/${encodeURIComponent(a.namespace)}/daemonsets/${encodeURIComponent(a.daemonSet)}`;
  const dispatcher = new Agent({
    connect: { ca, timeout: a.timeoutMs },
    headersTimeout: a.timeoutMs,
    bodyTimeout: a.timeoutMs,
  });
  try {
    const res = await request(new URL(path, a.server), {
      method: 'GET',
      dispatcher,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      signal: AbortSignal.timeout(a.timeoutMs),
    });
    const text = await res.body.text();
    if (res.statusCode === 404) return { kind: 'absent' };
    if (res.statusCode !== 200)
      return { kind: 'unknown', why: `API answered HTTP ${res.statusCode}: ${text.slice(0, 200)}` };
    const ts = (JSON.parse(text) as { metadata?: { deletionTimestamp?: unknown } }).metadata?.deletionTimestamp;
    return typeof ts === 'string' && ts !== '' ? { kind: 'deleting', deletionTimestamp: ts } : { kind: 'present' };
  } catch (e) {
    const err = e as Error & { code?: string; cause?: { message?: string; code?: string } };
    return {
      kind: 'unknown',
      why: `API unreachable at ${a.server}: ${err.code ?? err.cause?.code ?? ''} ${err.message}`.trim(),
    };
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}
