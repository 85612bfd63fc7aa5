// Whether the requester of an answer not yet written has stopped waiting for it (the ADD route
// passes this to the engine, which keeps no ADD nobody will hear: engine/add.ts).

import type { ServerResponse } from 'node:http';

/**
 * The connection closed before the answer was written: node:http aborts a request whose client
 * closed (or half-closed) its side, and no HTTP/1.1 client of this API half-closes while it waits.
 */
export function clientGone(res: ServerResponse): boolean {
  return !res.writableEnded && (res.destroyed || res.socket === null || !res.socket.writable);
}
