// Whether the requester of an answer not yet written has stopped waiting for it (the ADD route
// passes this to the engine, which keeps no ADD nobody will hear: engine/add.ts).

import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The connection closed before the answer was written: node:http aborts a request whose client
 * closed (or half-closed) its side, and no HTTP/1.1 client of this API half-closes while it waits.
 * The request's socket, not the response's: a pipelined response gets its socket only when the
 * ones ahead of it are done.
 */
export function clientGone(req: IncomingMessage, res: ServerResponse): boolean {
  return !res.writableEnded && (res.destroyed || req.socket.destroyed || !req.socket.writable);
}
