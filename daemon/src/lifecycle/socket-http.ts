// A small HTTP client for the daemon's own Unix socket, used by uninstall's drain and by the
// `stewardd probe` command the kubelet runs (an exec probe: no TCP port, no curl in the image).

import { request } from 'node:http';

export interface SocketReply {
  status: number;
  body: string;
}

/** The most of an answer read: a 100,000-row /v1/attachments is ~70 MB; past this the client stops. */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/**
 * One request; the whole exchange (connect, answer and its body) within `timeoutMs`. An idle
 * timeout alone let a server dripping a byte a second hold the CLI forever.
 */
export function socketRequest(
  socket: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
): Promise<SocketReply> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, method, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > MAX_ANSWER_BYTES)
          req.destroy(new Error(`the answer from ${socket} is over ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer from ${socket} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.on('close', () => clearTimeout(timer));
    req.end();
  });
}
