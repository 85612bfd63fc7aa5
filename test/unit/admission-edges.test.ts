// routes/admission.ts at its edges, on a real HTTP server over a Unix socket, without root:
//  - once both kinds of DEL slot are held, the DELs waiting behind are not looked up in the
//    engine's tombstone set (only a DEL behind its container's ADD could still go), whether the
//    tombstone slot is held by its cap or by the pace;
//  - a DEL that names no container is never admitted as behind an ADD, whatever the engine says;
//  - ADD priority lasts priorityMs after the last ADD is answered, not a moment more;
//  - the body deadline re-arms the DEL whose buffer was full, not the first one waiting;
//  - a hinted request whose handler has not read its full buffer yet is not stalled at its deadline;
//  - a request already answered is left alone by its deadline, even while its answer is queued behind
//    a pipelined one (not done yet): the connection, and the request served on it, are untouched.
// The clock of the admission (performance.now) is the test's where time matters; otherwise the
// assertions wait for what the server did, never for a time bound.

import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Admission, type AdmissionOptions, type Handler } from '../../daemon/src/routes/admission.js';
import { cniRequest, fakeServe, openRig, until, whole, type AdmissionRig } from '../helpers/admission-rig.js';

const T = { timeout: 20000 };

interface Rig extends AdmissionRig {
  /** The container id of every DEL the tombstone set was asked about, in order. */
  asked: string[];
}

/**
 * An Admission on its own server (test/helpers/admission-rig.ts), closed when the test ends. DELs of
 * ids starting with "tomb" are tombstoned; serve holds every id containing "hold" until released.
 * `next` stands in for fastify.
 */
async function rig(t: TestContext, o: Partial<AdmissionOptions> = {}, next?: Handler): Promise<Rig> {
  const asked: string[] = [];
  const engine = fakeServe((cid) => cid.includes('hold'));
  const admission = new Admission({
    maxDels: 1,
    maxDelsWhileAdding: 1,
    tombstonePaceMs: 0,
    priorityMs: 600_000,
    maxBodyBytes: 1 << 20,
    isTombstoned: (h) => {
      asked.push(h.containerId ?? '(none)');
      return h.containerId?.startsWith('tomb') === true;
    },
    serve: engine.serve,
    ...o,
  });
  const r = await openRig({
    tmpPrefix: 'steward-admission-edges-',
    admission,
    engine,
    next:
      next ??
      ((req: IncomingMessage, res: ServerResponse) => {
        req.resume();
        req.once('end', () => res.writeHead(418).end());
      }),
    // Status lines anywhere: a pipelined answer follows the body before it on the same line.
    statusesAnywhere: true,
  });
  t.after(r.close);
  return { ...r, asked };
}

/** The admission's clock, the test's own: performance.now() answers `clock.now` while the test runs. */
function ownClock(t: TestContext, start: number): { now: number } {
  const clock = { now: start };
  t.mock.method(performance, 'now', () => clock.now);
  return clock;
}

describe('admission at its edges', () => {
  it(
    'with both kinds of DEL slot held by their caps, the DELs waiting behind are not looked up in the tombstone set',
    T,
    async (t) => {
      const r = await rig(t);
      const hold = r.send(whole('DEL', 'hold-engine')); // the one engine DEL slot (maxDels 1)
      await until('the engine slot held', () => r.heldCount('hold-engine') === 1);
      const tomb = r.send(whole('DEL', 'tomb-hold')); // the one tombstone slot (min(2, maxDels))
      await until('the tombstone slot held', () => r.heldCount('tomb-hold') === 1);
      const waiting = [r.send(whole('DEL', 'x1'))];
      await until('x1 waiting', () => r.admission.stats.delsWaiting === 1);
      waiting.push(r.send(whole('DEL', 'tomb-2')));
      await until('tomb-2 waiting', () => r.admission.stats.delsWaiting === 2);
      // Each arrival pumps: x1 and tomb-2 are asked about and held by their caps; then both kinds are held.
      waiting.push(r.send(whole('DEL', 'x2')));
      await until('x2 waiting', () => r.admission.stats.delsWaiting === 3);
      waiting.push(r.send(whole('DEL', 'x3')));
      await until('x3 waiting', () => r.admission.stats.delsWaiting === 4);
      assert.deepEqual(
        r.asked.filter((c) => c === 'x2' || c === 'x3'),
        [],
        `not asked about while both kinds are held (asked: ${r.asked.join(' ')})`,
      );
      r.release('hold-engine');
      r.release('tomb-hold');
      await until('all answered', () => [hold, tomb, ...waiting].every((c) => c.statuses().length === 1));
      assert.deepEqual(
        new Set(r.served),
        new Set(['DEL hold-engine', 'DEL tomb-hold', 'DEL x1', 'DEL tomb-2', 'DEL x2', 'DEL x3']),
      );
      await until('at rest', r.atRest);
    },
  );

  it(
    'with the engine slot held and the next tombstoned DEL held by the pace, the DELs waiting behind are not looked up either',
    T,
    async (t) => {
      const clock = ownClock(t, 1000);
      const r = await rig(t, { tombstonePaceMs: 1, priorityMs: 600_000 });
      const add = r.send(whole('ADD', 'hold-add')); // ADDs being served: tombstoned DELs are paced
      await until('the ADD in flight', () => r.heldCount('hold-add') === 1);
      const first = r.send(whole('DEL', 'tomb-1'));
      await until('the first tombstoned DEL answered', () => first.statuses().length === 1);
      const slot = r.send(whole('DEL', 'hold-x')); // the one engine DEL slot while adding
      await until('the engine slot held', () => r.heldCount('hold-x') === 1);
      // The clock stands still: the next tombstoned DEL waits for the pace however often it pumps.
      const paced = r.send(whole('DEL', 'tomb-2'));
      await until('tomb-2 waiting', () => r.admission.stats.delsWaiting === 1);
      const y1 = r.send(whole('DEL', 'y1'));
      await until('y1 waiting', () => r.admission.stats.delsWaiting === 2);
      const y2 = r.send(whole('DEL', 'y2'));
      await until('y2 waiting', () => r.admission.stats.delsWaiting === 3);
      // A few pumps of the pace timer, all with tomb-2 paced and y1 capped.
      const askedBefore = r.asked.length;
      await until('pumped again', () => r.asked.length >= askedBefore + 4);
      assert.deepEqual(
        r.asked.filter((c) => c === 'y2'),
        [],
        `not asked about while both kinds are held (asked: ${r.asked.join(' ')})`,
      );
      clock.now += 1;
      await until('tomb-2 answered once the pace allows', () => paced.statuses().length === 1);
      r.release('hold-x');
      r.release('hold-add');
      await until('all answered', () => [add, slot, y1, y2].every((c) => c.statuses().length === 1));
      await until('at rest', r.atRest);
    },
  );

  it('a DEL that names no container is capped, even when the engine has an ADD of every container', T, async (t) => {
    const r = await rig(t, { hasAddOrCheck: () => true });
    const first = r.send(cniRequest('DEL', 'hold-n1', { noContainerHint: true }).text);
    await until('the engine slot held', () => r.heldCount('hold-n1') === 1);
    const second = r.send(cniRequest('DEL', 'hold-n2', { noContainerHint: true }).text);
    await until('the second DEL in', () => r.reqs.length === 2);
    assert.equal(r.admission.stats.delsWaiting, 1, 'it waits for the slot: it is behind no ADD it could name');
    assert.equal(r.admission.stats.delsAdmitted, 1);
    r.release('hold-n1');
    await until('the second served', () => r.heldCount('hold-n2') === 1);
    r.release('hold-n2');
    await until('both answered', () => [first, second].every((c) => c.statuses().length === 1));
    await until('at rest', r.atRest);
  });

  it('ADD priority lasts priorityMs after the last ADD is answered, and ends then', T, async (t) => {
    const clock = ownClock(t, 1000);
    const r = await rig(t, { priorityMs: 50 });
    assert.equal(r.admission.stats.addPriority, false, 'no ADD yet');
    const add = r.send(whole('ADD', 'a'));
    await until('the ADD answered', () => add.statuses().length === 1 && r.admission.stats.othersInFlight === 0);
    clock.now = 1049;
    assert.equal(r.admission.stats.addPriority, true, '49 ms after');
    clock.now = 1050;
    assert.equal(r.admission.stats.addPriority, false, '50 ms after: over');
  });

  it('the body deadline re-arms the DEL whose buffer was full, not a whole one waiting ahead of it', T, async (t) => {
    const deadline = 1000;
    const r = await rig(t, { bodyDeadlineMs: deadline });
    const holder = r.send(whole('DEL', 'hold-slot'));
    await until('the slot held', () => r.heldCount('hold-slot') === 1);
    const ahead = r.send(whole('DEL', 'ahead')); // whole, waits first
    await until('a DEL waiting', () => r.admission.stats.delsWaiting === 1);
    // Its headers and more body than node buffers unread, in one write; then nothing more.
    const { head, body } = cniRequest('DEL', 'full-buffer', { pad: 400 * 1024 });
    const big = r.send(head + body.slice(0, 300 * 1024));
    await until('the big DEL waiting', () => r.admission.stats.delsWaiting === 2 && r.reqs.length === 3);
    const req = r.reqs[2] as IncomingMessage;
    await until("node's buffer full", () => req.readableLength >= req.readableHighWaterMark);
    // Both deadlines pass while they wait: neither is a stall (one whole, one a full buffer).
    await new Promise((res) => setTimeout(res, deadline + 200));
    assert.equal(big.closed(), false);
    assert.equal(r.admission.stats.delsWaiting, 2);
    r.release('hold-slot');
    await until('the holder and the one ahead answered', () => [holder, ahead].every((c) => c.statuses().length === 1));
    // Admitted after it, the big DEL's body is read on and stops: a deadline of its own ends it.
    await until('the DEL that stopped answered 503 and closed', () => big.closed());
    assert.deepEqual(big.statuses(), [503]);
    assert.match(big.text(), new RegExp(`request body not received within ${deadline} ms`));
    assert.deepEqual(r.served, ['DEL hold-slot', 'DEL ahead']);
    await until('at rest', r.atRest);
  });

  it('a hinted request whose handler has not read its full buffer yet is not stalled at its deadline', T, async (t) => {
    const deadline = 1000;
    let read: (() => void) | undefined;
    const r = await rig(t, { bodyDeadlineMs: deadline }, (req, res) => {
      // A handler that reads the body only when the test says so.
      read = () => {
        req.resume();
        req.once('end', () => res.writeHead(200, { 'content-length': 0 }).end());
      };
    });
    // Its headers and more body than node buffers unread, in one write; the rest later.
    const { head, body } = cniRequest('ADD', 'slow-handler', { contentType: 'text/plain', pad: 400 * 1024 });
    const split = 300 * 1024;
    const c = r.send(head + body.slice(0, split));
    await until('handed to the handler', () => read !== undefined && r.reqs.length === 1);
    const req = r.reqs[0] as IncomingMessage;
    await until("node's buffer full", () => req.readableLength >= req.readableHighWaterMark);
    await new Promise((res) => setTimeout(res, deadline + 200));
    assert.deepEqual(c.statuses(), [], 'not answered 11: the body is there, unread');
    assert.equal(c.closed(), false);
    c.sock.write(body.slice(split));
    read?.();
    await until('answered by the handler', () => c.statuses().length === 1);
    assert.deepEqual(c.statuses(), [200]);
    await until('at rest', r.atRest);
  });

  it(
    'a pipelined request answered before its body came in, its answer queued behind the one ahead, is left alone by the deadline',
    T,
    async (t) => {
      const deadline = 300;
      const r = await rig(t, { bodyDeadlineMs: deadline }, (req, res) => {
        // Answers at once, before the body (what a refusal by its headers alone does).
        if (req.headers['content-type'] === 'text/plain') return void res.writeHead(200, { 'content-length': 0 }).end();
        req.resume();
        req.once('end', () => res.writeHead(418, { 'content-length': 0 }).end());
      });
      // One connection: an ADD served (held), then one answered at once whose body stops halfway;
      // its answer waits behind the first's, so it is answered but not done.
      const { head, body } = cniRequest('ADD', 'answered-early', { contentType: 'text/plain' });
      const half = Math.floor(body.length / 2);
      const t0 = Date.now();
      const c = r.send(whole('ADD', 'hold-ahead') + head + body.slice(0, half));
      await until('the first held, the second answered', () => r.heldCount('hold-ahead') === 1 && r.reqs.length === 2);
      // Past the deadline and the second after it in which a stalled request's connection is closed.
      await new Promise((res) => setTimeout(res, Math.max(0, t0 + deadline + 2000 - Date.now())));
      assert.equal(c.closed(), false, 'the connection, and the ADD served on it, untouched');
      r.release('hold-ahead');
      await until('both answered', () => c.statuses().length === 2);
      assert.deepEqual(c.statuses(), [200, 200]);
      c.sock.write(body.slice(half));
      c.sock.destroy();
      await until('at rest', r.atRest);
    },
  );
});
