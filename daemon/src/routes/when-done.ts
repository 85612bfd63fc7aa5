// When a request is done with, for counters that must be released exactly once: its response
// finished or its connection closed, whichever comes first (routes/admission.ts).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The 'close' listeners of each connection with a hinted request on it (one listener per connection). */
const onConnectionClose = new WeakMap<Socket, Set<() => void>>();

/**
 * Calls `fn` once, when the response is done or its connection closes, whichever comes first. A
 * pipelined response queued behind another never emits 'close' when its connection dies, so the
 * response alone would leave a counter taken for good.
 */
export function whenDone(req: IncomingMessage, res: ServerResponse, fn: () => void): void {
  const sock = req.socket;
  let fns = onConnectionClose.get(sock);
  if (!fns) {
    const set = new Set<() => void>();
    onConnectionClose.set(sock, (fns = set));
    sock.once('close', () => {
      for (const f of set) f();
    });
  }
  const set = fns;
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    set.delete(once);
    res.off('close', once);
    fn();
  };
  set.add(once);
  res.once('close', once);
  if (sock.closed) queueMicrotask(once);
}
