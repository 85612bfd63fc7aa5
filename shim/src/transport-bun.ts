// The socket request for the single-executable shim compiled by Bun: Bun's fetch speaks HTTP
// over a Unix socket natively (the `unix` option), which starts faster than any JS-written
// client (shared/shim-startup.md). Same contract as client.ts's postUnix; the build swaps it
// in for main.ts only (scripts/bundle-shim.mjs), so under Node the shim keeps node:net.

import { PROTOCOL_HEADER } from '@cni-steward/shared';
import { UnreachableError, type Reply } from './client.js';

/** Bun's RequestInit extension; not in Node's types. */
type UnixRequestInit = RequestInit & { unix: string };

export async function postUnix(
  socketPath: string,
  route: string,
  body: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const init: UnixRequestInit = {
    method: 'POST',
    unix: socketPath,
    body,
    headers: { ...headers, 'content-type': 'application/json', connection: 'close' },
    signal: AbortSignal.timeout(timeoutMs),
  };
  try {
    const res = await fetch(`http://localhost${route}`, init);
    return { status: res.status, body: await res.text(), protocol: res.headers.get(PROTOCOL_HEADER) ?? undefined };
  } catch (e) {
    const err = e as Error & { code?: string };
    if (err.name === 'TimeoutError') throw new UnreachableError(`no answer within ${timeoutMs} ms`);
    throw new UnreachableError(err.code ?? err.message);
  }
}
