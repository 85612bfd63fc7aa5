// Asking the Kubernetes API whether this daemon's own DaemonSet still exists, with the pod's
// service-account token and CA (in-cluster config). undici is the daemon's HTTP client, loaded only when asked.

import { readFileSync } from 'node:fs';
import { printableCapped } from '@cni-steward/shared';

export interface ApiAccess {
  /** https://host:port of the API server. */
  server: string;
  tokenFile: string;
  caFile: string;
  namespace: string;
  daemonSet: string;
  /**
   * This pod's own name (POD_NAME, the downward API's metadata.name), when known. A DaemonSet's
   * pods are named `<daemonSet>-<5 random characters>`: one not named so says `daemonSet` names
   * another DaemonSet (a label renamed apart from it), whose 404 says nothing about ours.
   */
  podName?: string;
  timeoutMs: number;
}

/**
 * Whether `a.podName` (when known) is a name the DaemonSet `a.daemonSet` would give its pods: the API
 * server's generateName, `<daemonSet>-` cut to 58 characters, then 5 of its random characters. A
 * DaemonSet `steward-prod` labelled `steward` names its pods `steward-prod-xxxxx`: not one of them.
 */
export function podOfDaemonSet(a: ApiAccess): boolean {
  if (a.podName === undefined) return true;
  const prefix = `${a.daemonSet}-`.slice(0, 58);
  return (
    a.podName.length === prefix.length + 5 &&
    a.podName.startsWith(prefix) &&
    /^[bcdfghjklmnpqrstvwxz2456789]{5}$/.test(a.podName.slice(prefix.length))
  );
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
    // Appended, not resolved: new URL(path, server) would drop a path in --k8s-api (a proxy's
    // /k8s/clusters/c-1), and the request would be answered 404 by something that is not the API.
    const res = await request(`${a.server.replace(/\/+$/, '')}${path}`, {
      method: 'GET',
      dispatcher,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      signal: AbortSignal.timeout(a.timeoutMs),
    });
    const text = await res.body.text();
    if (res.statusCode === 404) return notFound(text, a.daemonSet);
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

/**
 * A 404 is the DaemonSet's absence only when it is the API server's own answer for it: a Status of
 * reason NotFound naming it. Any other 404 (a proxy, a wrong path in --k8s-api) would uninstall
 * the node on every restart; it is taken as not knowing.
 */
export function notFound(text: string, daemonSet: string): DaemonSetState {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const s = body as { kind?: unknown; reason?: unknown; details?: { name?: unknown; kind?: unknown } } | undefined;
  if (
    s?.kind === 'Status' &&
    s.reason === 'NotFound' &&
    s.details?.name === daemonSet &&
    (s.details.kind === undefined || s.details.kind === 'daemonsets')
  )
    return { kind: 'absent' };
  return {
    kind: 'unknown',
    why: `HTTP 404 that is not the API server's NotFound for daemonsets/${daemonSet}: ${printableCapped(text, 200)}`,
  };
}
