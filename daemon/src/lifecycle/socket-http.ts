// A small HTTP client for the daemon's own Unix socket, used by uninstall's drain and by the
// `stewardd probe` command the kubelet runs (an exec probe: no TCP port, no curl in the image).

import { request } from 'node:http';

export interface SocketReply {
  status: number;
  body: string;
}

/** The most of an answer read: a 100,000-row /v1/attachments is ~70 MB; past this the client stops. */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/** How many times `timeoutMs` an answer's body may take in all, as long as it keeps coming. */
export const BODY_TIMEOUT_FACTOR = 10;

/**
 * One request. The answer's headers must come within `timeoutMs`; its body may then take up to
 * BODY_TIMEOUT_FACTOR times that in all, with no gap of `timeoutMs`: a 100,000-row listing is
 * written over seconds, 250 rows at a time, while an idle timeout alone let a server dripping a
 * byte a second hold the CLI forever.
 */
export function socketRequest(
  socket: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
): Promise<SocketReply> {
  return new Promise((resolve, reject) => {
    let failure: Error | undefined;
    const cut = (why: string) => () => {
      failure = new Error(`no answer from ${socket} within ${timeoutMs} ms${why}`);
      req.destroy(failure);
    };
    let timer = setTimeout(cut(''), timeoutMs);
    const req = request({ socketPath: socket, method, path, agent: false }, (res) => {
      clearTimeout(timer);
      const whole = timeoutMs * BODY_TIMEOUT_FACTOR;
      timer = setTimeout(cut(` (its body still coming after ${whole} ms)`), whole);
      res.setTimeout(timeoutMs, cut(' (its body stopped coming)'));
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes <= MAX_ANSWER_BYTES) return void chunks.push(c);
        failure = new Error(`the answer from ${socket} is over ${MAX_ANSWER_BYTES} bytes`);
        req.destroy(failure);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      // Cut off mid-body: 'end' never comes, and the request's own error may not be emitted.
      res.on('close', () => {
        if (!res.complete) reject(failure ?? new Error(`the answer from ${socket} was cut off`));
      });
    });
    req.on('error', (e) => reject(failure ?? e));
    req.on('close', () => clearTimeout(timer));
    req.end();
  });
}
