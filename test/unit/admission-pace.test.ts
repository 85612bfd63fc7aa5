// routes/admission.ts on a real HTTP server over a Unix socket: while an ADD is being served (in
// flight, or answered within `priorityMs`), DELs answered from a tombstone are paced to one per
// `tombstonePaceMs`; without ADDs they are answered at once. The pace and window are made long here
// (200 ms, 300 ms) so the assertions are lower bounds on elapsed time, which a loaded machine cannot
// break, and one upper bound far from them.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CNI_ROUTE, hintHeaders } from '@cni-steward/shared';
import { Admission } from '../../daemon/src/routes/admission.js';

const PACE_MS = 200;
const PRIORITY_MS = 300;

const dir = mkdtempSync(join(tmpdir(), 'steward-admission-'));
const socket = join(dir, 's.sock');
let server: Server;
let admission: Admission;
/** ADDs the test holds open, answered when it says so. */
const heldAdds: Array<(text: string) => void> = [];
/** Requests that reached fastify's place (none should: every request here is hinted JSON). */
let unparsed = 0;

before(async () => {
  admission = new Admission({
    maxDels: 2,
    maxDelsWhileAdding: 1,
    tombstonePaceMs: PACE_MS,
    priorityMs: PRIORITY_MS,
    maxBodyBytes: 1 << 20,
    isTombstoned: (h) => h.command === 'DEL',
    serve: (_body, hints) =>
      hints.command === 'ADD'
        ? new Promise<string>((resolve) => heldAdds.push(resolve))
        : Promise.resolve('{"cniVersion":"1.0.0"}'),
  });
  server = createServer(
    admission.listener((_req, res) => {
      unparsed++;
      res.writeHead(500).end();
    }),
  );
  await new Promise<void>((r) => server.listen(socket, r));
});
after(async () => {
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function post(command: string, containerId: string): Promise<number> {
  const env = { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_IFNAME: 'eth0' };
  const config = { cniVersion: '1.0.0', name: 'net', type: 'steward' };
  const body = JSON.stringify({ env, config });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: socket,
        path: CNI_ROUTE,
        method: 'POST',
        agent: false,
        headers: { ...hintHeaders(env, config), 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

async function delsTake(count: number, prefix: string): Promise<number> {
  const t0 = performance.now();
  const statuses = await Promise.all(Array.from({ length: count }, (_, i) => post('DEL', `${prefix}-${i}`)));
  assert.deepEqual(
    statuses,
    statuses.map(() => 200),
  );
  return performance.now() - t0;
}

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

describe('tombstoned DELs while ADDs are served', () => {
  it('without an ADD, 8 DELs are answered at once, not paced', async () => {
    assert.equal(admission.stats.addPriority, false);
    const ms = await delsTake(8, 'idle');
    assert.ok(ms < 7 * PACE_MS, `8 DELs took ${ms} ms, as if paced at ${PACE_MS} ms`);
  });

  it('while an ADD is in flight, DELs are answered one per pace, and all of them 200', async () => {
    const add = post('ADD', 'pod');
    await until('the ADD reaches its handler', () => heldAdds.length === 1);
    assert.equal(admission.stats.addPriority, true);
    const ms = await delsTake(4, 'busy');
    // The first may go at once; the other three each wait a pace after the one before.
    assert.ok(ms >= 3 * PACE_MS - 5, `4 DELs took ${ms} ms, less than 3 paces of ${PACE_MS} ms`);
    heldAdds.shift()?.('{}');
    assert.equal(await add, 200);
  });

  it('the pacing lasts priorityMs after the last ADD is answered, then ends', async () => {
    // Its own ADD, answered here: the window is measured from this answer, not the previous test's.
    const add = post('ADD', 'pod-window');
    await until('the ADD reaches its handler', () => heldAdds.length === 1);
    heldAdds.shift()?.('{}');
    assert.equal(await add, 200);
    assert.equal(admission.stats.addPriority, true, 'right after the ADD, DELs are still paced');
    await new Promise((r) => setTimeout(r, PRIORITY_MS + 50));
    assert.equal(admission.stats.addPriority, false);
    const ms = await delsTake(8, 'after');
    assert.ok(ms < 7 * PACE_MS, `8 DELs took ${ms} ms after the window, as if still paced`);
  });

  it('an ADD arriving while DELs wait for the pace is admitted at once', async () => {
    const first = post('ADD', 'pod-a');
    await until('the first ADD reaches its handler', () => heldAdds.length === 1);
    const dels = delsTake(5, 'queued');
    await until('DELs wait for the pace', () => admission.stats.delsWaiting >= 3);
    const second = post('ADD', 'pod-b');
    await until('the second ADD reaches its handler while DELs still wait', () => heldAdds.length === 2);
    assert.ok(admission.stats.delsWaiting >= 1, 'DELs were still waiting when the ADD got through');
    for (const answer of heldAdds.splice(0)) answer('{}');
    assert.equal(unparsed, 0, 'every hinted JSON request is served at admission');
    assert.deepEqual(await Promise.all([first, second]), [200, 200]);
    await dels;
  });
});
