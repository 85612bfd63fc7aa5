// A small HTTP client for the daemon's own Unix socket, used by uninstall's drain and by the
// `stewardd probe` command the kubelet runs (an exec probe: no TCP port, no curl in the image).

import { request } from 'node:http';

export interface SocketReply {
  status: number;
  body: string;
}

export function socketRequest(
  socket: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
): Promise<SocketReply> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, method, path, timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${socket} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
