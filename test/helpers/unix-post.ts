// One HTTP/1.1 request over a Unix socket, written by hand on node:net, as the shim writes it
// (shim/client.go): tests that attack stewardd's socket send exactly the shim's request, hints
// and all, without a shim process. (This was the TypeScript shim's client.)

import { connect } from 'node:net';

export interface Reply {
  status: number;
  body: string;
  /** The daemon's protocol version header (PROTOCOL_HEADER), undefined when it sent none. */
  protocol?: string | undefined;
}

/** Connection-level failure: the daemon could not be reached or did not answer in time. */
export class UnreachableError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

export function postUnix(
  socketPath: string,
  route: string,
  body: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(body, 'utf8');
    const head =
      `POST ${route} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${payload.length}\r\nConnection: close\r\n` +
      // Hint values are percent-encoded by the caller: no CR or LF can reach the head.
      Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('') +
      '\r\n';
    const chunks: Buffer[] = [];
    let connected = false;
    const sock = connect({ path: socketPath });
    sock.setTimeout(timeoutMs, () => {
      sock.destroy();
      reject(
        new UnreachableError(
          connected ? `no answer within ${timeoutMs} ms` : `connect timed out after ${timeoutMs} ms`,
        ),
      );
    });
    sock.once('connect', () => {
      connected = true;
      // No half-close: the daemon answers and closes (Connection: close).
      sock.write(Buffer.concat([Buffer.from(head, 'latin1'), payload]));
    });
    sock.on('data', (b: Buffer) => chunks.push(b));
    sock.once('error', (e: NodeJS.ErrnoException) => reject(new UnreachableError(e.code ?? e.message)));
    sock.once('close', () => {
      if (!connected) return;
      try {
        resolve(parseResponse(Buffer.concat(chunks)));
      } catch (e) {
        reject(new UnreachableError((e as Error).message));
      }
    });
  });
}

/** A complete HTTP/1.1 answer; throws when it is not (cut off, malformed). Exported for its unit test. */
export function parseResponse(raw: Buffer): Reply {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error('connection closed before a complete HTTP response');
  const head = raw.subarray(0, end).toString('latin1');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  if (!Number.isInteger(status)) throw new Error('malformed HTTP status line');
  let body = raw.subarray(end + 4);
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
  // An answer cut off (the daemon died while writing it) is no answer: never print part of one.
  if (length !== undefined) {
    if (body.length < Number(length)) throw new Error(`connection closed after ${body.length} of ${length} body bytes`);
    body = body.subarray(0, Number(length));
  } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) body = dechunk(body);
  const protocol = /\r\nx-steward-protocol:[ \t]*([^\r]*)/i.exec(head)?.[1]?.trim();
  return { status, body: body.toString('utf8'), protocol };
}

/** A chunked body, whole: it must end with its zero-size chunk, each chunk complete. */
function dechunk(buf: Buffer): Buffer {
  const parts: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', i);
    if (eol < 0) throw new Error('connection closed before the last chunk of the answer');
    const size = Number.parseInt(buf.subarray(i, eol).toString('latin1'), 16);
    if (!Number.isInteger(size) || size < 0) throw new Error('malformed chunk size in the answer');
    if (size === 0) return Buffer.concat(parts);
    if (buf.length < eol + 2 + size) throw new Error('connection closed inside a chunk of the answer');
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}
