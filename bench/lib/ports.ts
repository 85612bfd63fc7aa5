// Loopback ports for the rows: one to listen on (the metrics port), or one nothing listens on (a
// collector that is down, the tracing rows).

import { createServer } from 'node:net';

/** A loopback TCP port nothing listens on right now (the kernel picks it; released before use). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
