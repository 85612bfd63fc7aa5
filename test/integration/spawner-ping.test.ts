// The spawner's health ping (/healthz) when stewardd's own event loop was blocked past the ping's
// wait (a synced commit on a slow disk): the answer the spawner already sent is read before the
// spawner is called stuck, so a spawner that answered, and every plugin it runs, is not killed.
// A review found the first slow ping killed it (30 Nov). Real spawner process (the built dist).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Spawner } from '../../daemon/dist/plugins/spawner.js';
import { childrenOf } from '../helpers/children.js';

/** The pids of this process's children running the spawner. */
const spawners = () => childrenOf(process.pid, 'spawner-child');

/** Blocks this process's event loop for `ms`, as a long synchronous commit would. */
function block(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    /* busy */
  }
}

describe('spawner health ping after a blocked loop', () => {
  const spawner = new Spawner(pino({ level: 'silent' }));
  after(() => spawner.close());

  it('a spawner that answered while stewardd was blocked is healthy and is not replaced', async () => {
    assert.equal(await spawner.health(), undefined, 'started and answering');
    const [pid] = spawners();
    assert.ok(pid, 'one spawner running');
    // A spawner forked less than 10 s ago gets that long to answer (its Node still starting): past it.
    await new Promise((r) => setTimeout(r, 10_500));
    for (let i = 0; i < 3; i++) {
      const ping = spawner.health(200);
      block(600); // the ping's wait passes while its answer waits unread
      assert.equal(await ping, undefined);
      assert.deepEqual(spawners(), [pid], `round ${i}: the same spawner, not killed and forked again`);
    }
  });
});
