// routes/admission.ts on a real HTTP server over a Unix socket, without root: which requests it
// serves as CNI, the protocol check of hinted and plain requests, the DEL caps of each kind, DELs
// behind a container's ADD, and its counters back at rest after clients go away. Every test builds
// its own server and Admission (withRig below, on test/helpers/admission-rig.ts) and tears them
// down even when it fails, so no test depends on another's timing. Assertions wait for what the
// server did (a request served, waiting or answered), never for a time bound.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CNI_ROUTE, PROTOCOL_HEADER, PROTOCOL_VERSION } from '@cni-steward/shared';
import { Admission, type AdmissionOptions } from '../../daemon/src/routes/admission.js';
import {
  cniRequest as cniRequestParts,
  fakeServe,
  openRig,
  until,
  type AdmissionRig,
  type CniRequestOptions,
} from '../helpers/admission-rig.js';

const T = { timeout: 20000 };

interface Rig extends AdmissionRig {
  /** `METHOD target` of every request handed to the next (fastify's) handler. */
  nexts: string[];
  skews: string[];
  /** Container ids whose DELs the engine would answer from a tombstone (besides ids starting with "tomb"). */
  tombstoned: Set<string>;
}

type RigOptions = Partial<Omit<AdmissionOptions, 'serve' | 'isTombstoned' | 'onSkew'>> & {
  withHasAddOrCheck?: boolean;
};

/**
 * Runs `fn` against its own server and Admission (test/helpers/admission-rig.ts); everything is
 * released and closed afterwards, even on failure. serve holds every id containing "hold".
 */
async function withRig(opts: RigOptions, fn: (r: Rig) => Promise<void>): Promise<void> {
  const nexts: string[] = [];
  const skews: string[] = [];
  const tombstoned = new Set<string>();
  const engine = fakeServe((cid) => cid.includes('hold'));
  const { withHasAddOrCheck = true, ...limits } = opts;
  const admission = new Admission({
    maxDels: 2,
    maxDelsWhileAdding: 1,
    // No pacing timer (the pace tests are admission-pace.test.ts): 0 ms between tombstoned DELs.
    tombstonePaceMs: 0,
    // Long enough that ADD priority never ends within a test; only a comparison, no timer.
    priorityMs: 600_000,
    maxBodyBytes: 1 << 20,
    ...limits,
    isTombstoned: (h) =>
      h.command === 'DEL' &&
      h.containerId !== undefined &&
      (h.containerId.startsWith('tomb') || tombstoned.has(h.containerId)),
    // The engine runs no ADD of its own here: only the connections' ADDs count.
    ...(withHasAddOrCheck ? { hasAddOrCheck: (cid: string) => cid.startsWith('engine-adding') } : {}),
    onSkew: (v) => skews.push(v),
    serve: engine.serve,
  });
  const rig = await openRig({
    tmpPrefix: 'steward-admission-counters-',
    admission,
    engine,
    next: (req, res) => {
      nexts.push(`${req.method} ${req.url}`);
      req.resume();
      res.writeHead(418).end();
    },
  });
  try {
    await fn({ ...rig, nexts, skews, tombstoned });
  } finally {
    await rig.close();
  }
}

/** The text of a CNI request as the shim sends it, or of a variant of it. */
const cniRequest = (command: string, containerId: string, o?: CniRequestOptions): string =>
  cniRequestParts(command, containerId, o).text;

const atRest = (r: Rig) => r.atRest;

/** Waits until the server has closed all but `n` connections (its side of each close handled). */
async function connectionsDown(r: Rig, n: number): Promise<void> {
  const end = Date.now() + 15000;
  while ((await r.connections()) > n && Date.now() < end) await new Promise((res) => setTimeout(res, 5));
  assert.equal(await r.connections(), n, `${n} connections left`);
}

/**
 * Waits until `entry` (a request just sent) is served or `waiting` DELs wait, and says which. Called
 * right after sending it: the server cannot have seen it yet, so earlier serves of the same entry
 * do not count.
 */
async function servedOrWaiting(r: Rig, entry: string, waiting: number): Promise<'served' | 'waiting'> {
  const count = () => r.served.filter((e) => e === entry).length;
  const before = count();
  await until(
    `${entry} served or ${waiting} DELs waiting`,
    () => count() > before || r.admission.stats.delsWaiting === waiting,
  );
  return count() > before ? 'served' : 'waiting';
}

describe('which requests the admission serves as CNI', () => {
  it('a hinted JSON request that is not POST /v1/cni goes to the next handler untouched, never served', T, () =>
    withRig({}, async (r) => {
      const cases = [
        cniRequest('ADD', 'get-add', { method: 'GET' }), // not POST
        cniRequest('DEL', 'tomb-put', { method: 'PUT' }),
        cniRequest('DEL', 'tomb-get-variant', { method: 'GET', target: `${CNI_ROUTE}?x=1` }), // not POST: not refused as a variant
        cniRequest('ADD', 'other-route', { target: '/v1/status' }), // another route: its hints are not read
      ];
      for (const text of cases) {
        const c = r.send(text);
        await until('answered', () => c.statuses().length === 1);
        assert.deepEqual(c.statuses(), [418], text.split('\r\n')[0]);
      }
      assert.deepEqual(r.nexts, ['GET /v1/cni', 'PUT /v1/cni', 'GET /v1/cni?x=1', 'POST /v1/status']);
      assert.deepEqual(r.served, []);
      assert.ok(atRest(r)(), 'nothing counted');
    }),
  );

  it('another route with a stale protocol header is not checked (only the CNI route speaks the protocol)', T, () =>
    withRig({}, async (r) => {
      const text = cniRequest('ADD', 'other-skew', { target: '/v1/status' }).replace(
        `${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}`,
        `${PROTOCOL_HEADER}: 1`,
      );
      const c = r.send(text);
      await until('answered', () => c.statuses().length === 1);
      assert.deepEqual(c.statuses(), [418]);
      assert.deepEqual(r.skews, []);
      assert.ok(!new RegExp(`^${PROTOCOL_HEADER}:`, 'im').test(c.text()), 'no protocol stamped on another route');
    }),
  );
});

describe('the protocol check, with and without hints', () => {
  it('a hinted request without the protocol header speaks the unversioned protocol: refused 409, never served', T, () =>
    withRig({}, async (r) => {
      const c = r.send(cniRequest('ADD', 'unversioned', { drop: new RegExp(`^${PROTOCOL_HEADER}:`, 'i') }));
      await until('answered', () => c.statuses().length === 1);
      assert.deepEqual(c.statuses(), [409]);
      assert.deepEqual(r.skews, ['1']);
      assert.deepEqual(r.served, []);
      assert.match(c.text(), new RegExp(`^${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}\r$`, 'im'));
      await until('nothing counted', atRest(r));
    }),
  );

  it(
    'a request without hints and without the protocol header (curl) is not refused: the next handler gets it, stamped',
    T,
    () =>
      withRig({}, async (r) => {
        const c = r.send(cniRequest('DEL', 'tomb-curl', { drop: /^(x-cni-|x-steward-protocol:)/i }));
        await until('answered', () => c.statuses().length === 1);
        assert.deepEqual(c.statuses(), [418]);
        assert.deepEqual(r.nexts, ['POST /v1/cni']);
        assert.deepEqual(r.skews, []);
        assert.match(c.text(), new RegExp(`^${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}\r$`, 'im'));
      }),
  );

  it("a hinted request in this daemon's protocol is served raw, its answer stamped with the protocol", T, () =>
    withRig({}, async (r) => {
      const c = r.send(cniRequest('ADD', 'current'));
      await until('answered', () => c.statuses().length === 1);
      assert.deepEqual(c.statuses(), [200]);
      assert.deepEqual(r.served, ['ADD current']);
      assert.match(c.text(), new RegExp(`^${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}\r$`, 'im'));
      assert.deepEqual(r.skews, []);
    }),
  );
});

describe('DEL caps and the counters behind them', () => {
  it('with maxDels 1, tombstoned DELs are capped at 1 too, and do not take the engine DEL slot', T, () =>
    // Without hasAddOrCheck (it is optional): an engine DEL is judged by the connections' ADDs alone.
    withRig({ maxDels: 1, withHasAddOrCheck: false }, async (r) => {
      const t1 = r.send(cniRequest('DEL', 'tomb-hold-1'));
      await until('the first tombstoned DEL served', () => r.heldCount('tomb-hold-1') === 1);
      const t2 = r.send(cniRequest('DEL', 'tomb-hold-2'));
      assert.equal(await servedOrWaiting(r, 'DEL tomb-hold-2', 1), 'waiting', 'a second tombstoned DEL waits (cap 1)');
      // The engine's slot is free: a tombstoned DEL in flight, another waiting, do not hold it.
      const e = r.send(cniRequest('DEL', 'hold-e'));
      await until('the engine DEL served at once', () => r.heldCount('hold-e') === 1);
      assert.deepEqual(r.admission.stats.delsWaiting, 1);
      assert.deepEqual(r.admission.stats.delsAdmitted, 2);
      r.release('tomb-hold-1');
      await until(
        'the second tombstoned DEL served once the first is answered',
        () => r.heldCount('tomb-hold-2') === 1,
      );
      r.release('tomb-hold-2');
      r.release('hold-e');
      await until('all answered', () => [t1, t2, e].every((c) => c.statuses().length === 1));
      assert.deepEqual(
        [t1, t2, e].map((c) => c.statuses()[0]),
        [200, 200, 200],
      );
      assert.deepEqual(r.served, ['DEL tomb-hold-1', 'DEL hold-e', 'DEL tomb-hold-2']);
      assert.equal(r.admission.stats.delsAnsweredEarly, 2);
      await until('counters at rest', atRest(r));
    }),
  );

  it('with maxDels 2 and no ADD, two tombstoned DELs go at once and the third waits', T, () =>
    withRig({ maxDels: 2 }, async (r) => {
      const dels = ['tomb-hold-a', 'tomb-hold-b'].map((cid) => r.send(cniRequest('DEL', cid)));
      await until('two tombstoned DELs served', () => r.heldCount('tomb-hold-a') + r.heldCount('tomb-hold-b') === 2);
      const third = r.send(cniRequest('DEL', 'tomb-hold-c'));
      assert.equal(await servedOrWaiting(r, 'DEL tomb-hold-c', 1), 'waiting');
      r.release('tomb-hold-b');
      await until('the third served once one is answered', () => r.heldCount('tomb-hold-c') === 1);
      r.release('tomb-hold-a');
      r.release('tomb-hold-c');
      await until('all answered', () => [...dels, third].every((c) => c.statuses().length === 1));
      await until('counters at rest', atRest(r));
    }),
  );

  it(
    'a waiting DEL whose client gives up leaves the admitted count alone: the next DEL still waits for the slot',
    T,
    () =>
      withRig({ maxDels: 1 }, async (r) => {
        const a = r.send(cniRequest('DEL', 'hold-a'));
        await until('the first DEL holds the one slot', () => r.heldCount('hold-a') === 1);
        const b = r.send(cniRequest('DEL', 'hold-b'));
        assert.equal(await servedOrWaiting(r, 'DEL hold-b', 1), 'waiting');
        b.sock.destroy();
        await until('the given-up DEL no longer waits', () => r.admission.stats.delsWaiting === 0);
        assert.equal(r.admission.stats.delsAdmitted, 1, 'the DEL in its slot is still counted');
        const c = r.send(cniRequest('DEL', 'hold-c'));
        assert.equal(await servedOrWaiting(r, 'DEL hold-c', 1), 'waiting', 'the slot is still taken');
        r.release('hold-a');
        await until('the next DEL served', () => r.heldCount('hold-c') === 1);
        r.release('hold-c');
        await until('both answered', () => a.statuses().length === 1 && c.statuses().length === 1);
        assert.deepEqual(r.served, ['DEL hold-a', 'DEL hold-c'], 'the given-up DEL was never served');
        await until('counters at rest', atRest(r));
      }),
  );

  it("an ADD's container count drops when it is answered: a later DEL of that container is capped again", T, () =>
    withRig({ maxDels: 1, maxDelsWhileAdding: 1 }, async (r) => {
      const add = r.send(cniRequest('ADD', 'hold-c'));
      await until('the ADD held', () => r.heldCount('hold-c') === 1);
      const behind = r.send(cniRequest('DEL', 'hold-c'));
      await until('the DEL behind the ADD served at once', () => r.heldCount('hold-c') === 2);
      r.release('hold-c');
      await until('ADD and DEL answered', () => add.statuses().length === 1 && behind.statuses().length === 1);
      await until('counters at rest', atRest(r));
      const x = r.send(cniRequest('DEL', 'hold-x'));
      await until('another DEL takes the one slot', () => r.heldCount('hold-x') === 1);
      const again = r.send(cniRequest('DEL', 'hold-c'));
      assert.equal(
        await servedOrWaiting(r, 'DEL hold-c', 1),
        'waiting',
        'no ADD of hold-c in flight: its DEL waits for the slot',
      );
      r.release('hold-x');
      await until('the DEL served once the slot frees', () => r.heldCount('hold-c') === 1);
      r.release('hold-c');
      await until('all answered', () => [x, again].every((c) => c.statuses().length === 1));
      assert.deepEqual(r.served, ['ADD hold-c', 'DEL hold-c', 'DEL hold-x', 'DEL hold-c']);
      await until('counters at rest', atRest(r));
    }),
  );

  it('a stalled DEL cut off by the body deadline does not take a DEL waiting behind it along', T, async () =>
    withRig({ maxDels: 1 }, async (r) => {
      const a = r.send(cniRequest('DEL', 'hold-a'));
      await until('the first DEL holds the one slot', () => r.heldCount('hold-a') === 1);
      const stalled = r.send(cniRequest('DEL', 'stalled', { bodyBytes: 10 }));
      await until('the stalled DEL waits', () => r.admission.stats.delsWaiting === 1);
      const b = r.send(cniRequest('DEL', 'b'));
      await until('b waits behind it', () => r.admission.stats.delsWaiting === 2);
      await until('the stalled DEL answered 503 and closed', () => stalled.closed(), 15000);
      assert.deepEqual(stalled.statuses(), [503]);
      await connectionsDown(r, 2);
      assert.equal(r.admission.stats.delsWaiting, 1, 'b still waits');
      r.release('hold-a');
      await until('b served once the slot frees', () => b.statuses().length === 1);
      assert.deepEqual(b.statuses(), [200]);
      assert.deepEqual(a.statuses(), [200]);
      assert.deepEqual(r.served, ['DEL hold-a', 'DEL b']);
      await until('counters at rest', atRest(r));
    }),
  );
});

describe("DELs behind a container's DEL", () => {
  it(
    "a DEL of a container whose DEL is in the engine is served at once, uncapped, and the next pod's DEL keeps the slot it waits for",
    T,
    () =>
      withRig({ maxDels: 1 }, async (r) => {
        const first = r.send(cniRequest('DEL', 'hold-a'));
        await until('the first DEL holds the one slot', () => r.heldCount('hold-a') === 1);
        // A runtime's retry of that DEL (its delegate hangs): it joins the first in the engine.
        const retry = r.send(cniRequest('DEL', 'hold-a'));
        assert.equal(await servedOrWaiting(r, 'DEL hold-a', 1), 'served', 'the retry did not wait for a slot');
        const other = r.send(cniRequest('DEL', 'hold-b'));
        assert.equal(
          await servedOrWaiting(r, 'DEL hold-b', 1),
          'waiting',
          "the retry took no slot from the cap's count",
        );
        assert.equal(r.admission.stats.delsAdmitted, 2);
        r.release('hold-a');
        await until('the other pod served once the slot frees', () => r.heldCount('hold-b') === 1);
        // Both of hold-a's DELs answered: its next DEL is capped again.
        const later = r.send(cniRequest('DEL', 'hold-a'));
        assert.equal(await servedOrWaiting(r, 'DEL hold-a', 1), 'waiting', 'no DEL of hold-a in flight any more');
        r.release('hold-b');
        await until('the later DEL served', () => r.heldCount('hold-a') === 1);
        r.release('hold-a');
        await until('all answered', () => [first, retry, other, later].every((c) => c.statuses().length === 1));
        assert.deepEqual(r.served, ['DEL hold-a', 'DEL hold-a', 'DEL hold-b', 'DEL hold-a']);
        await until('counters at rest', atRest(r));
      }),
  );
});

describe("DELs behind a container's ADD", () => {
  it('a DEL of a container whose ADD is in flight is served at once even when both kinds of DEL are held', T, () =>
    withRig({ maxDels: 2, maxDelsWhileAdding: 1 }, async (r) => {
      const add = r.send(cniRequest('ADD', 'hold-a'));
      await until('the ADD held', () => r.heldCount('hold-a') === 1);
      const e1 = r.send(cniRequest('DEL', 'hold-e1'));
      await until('an engine DEL takes the one slot while adding', () => r.heldCount('hold-e1') === 1);
      const e2 = r.send(cniRequest('DEL', 'e2'));
      await until('another engine DEL waits', () => r.admission.stats.delsWaiting === 1);
      const t1 = r.send(cniRequest('DEL', 'tomb-hold-t1'));
      await until('a tombstoned DEL takes its one slot while adding', () => r.heldCount('tomb-hold-t1') === 1);
      const t2 = r.send(cniRequest('DEL', 'tomb-t2'));
      await until('another tombstoned DEL waits', () => r.admission.stats.delsWaiting === 2);
      const e3 = r.send(cniRequest('DEL', 'e3'));
      await until('a third engine DEL waits behind them', () => r.admission.stats.delsWaiting === 3);
      const del = r.send(cniRequest('DEL', 'hold-a'));
      assert.equal(await servedOrWaiting(r, 'DEL hold-a', 4), 'served', 'the DEL behind the ADD did not wait');
      assert.equal(r.admission.stats.delsWaiting, 3);
      r.release('hold-e1');
      await until('the waiting engine DELs served in turn', () => r.served.includes('DEL e3'));
      r.release('tomb-hold-t1');
      await until('the waiting tombstoned DEL served', () => r.served.includes('DEL tomb-t2'));
      r.release('hold-a');
      const all = [add, e1, e2, t1, t2, del, e3];
      await until('all answered', () => all.every((c) => c.statuses().length === 1));
      assert.deepEqual(
        all.map((c) => c.statuses()[0]),
        all.map(() => 200),
      );
      assert.deepEqual(r.served, [
        'ADD hold-a',
        'DEL hold-e1',
        'DEL tomb-hold-t1',
        'DEL hold-a',
        'DEL e2',
        'DEL e3',
        'DEL tomb-t2',
      ]);
      await until('counters at rest', atRest(r));
    }),
  );

  it('a tombstoned DEL of a container whose ADD is in flight stays a tombstoned DEL: capped with them', T, () =>
    withRig({ maxDels: 2, maxDelsWhileAdding: 1 }, async (r) => {
      const add = r.send(cniRequest('ADD', 'tomb-hold-c'));
      await until('the ADD held', () => r.heldCount('tomb-hold-c') === 1);
      const d1 = r.send(cniRequest('DEL', 'tomb-hold-c'));
      await until('one tombstoned DEL served', () => r.heldCount('tomb-hold-c') === 2);
      const d2 = r.send(cniRequest('DEL', 'tomb-hold-c'));
      await until('or served', () => r.heldCount('tomb-hold-c') === 3 || r.admission.stats.delsWaiting === 1);
      assert.equal(r.heldCount('tomb-hold-c'), 2, 'the second tombstoned DEL waits for the one slot');
      // The engine DEL slot is untouched by it.
      const e = r.send(cniRequest('DEL', 'hold-e'));
      await until('an engine DEL served at once', () => r.heldCount('hold-e') === 1);
      r.release('tomb-hold-c');
      await until('the second served once the first is answered', () => r.heldCount('tomb-hold-c') === 1);
      r.release('tomb-hold-c');
      r.release('hold-e');
      await until('all answered', () => [add, d1, d2, e].every((c) => c.statuses().length === 1));
      await until('counters at rest', atRest(r));
    }),
  );
});

describe('tombstoned DELs while ADDs are served, at pace 0', () => {
  it('DELs torn down while they waited are answered from the tombstone, in arrival order, in one go', T, () =>
    withRig({ maxDels: 2, maxDelsWhileAdding: 1 }, async (r) => {
      const add = r.send(cniRequest('ADD', 'pod'));
      await until('an ADD answered (ADD priority from now on)', () => add.statuses().length === 1);
      assert.equal(r.admission.stats.addPriority, true);
      const slots = ['hold-e1', 'hold-e2'].map((cid) => r.send(cniRequest('DEL', cid)));
      await until('both engine DEL slots taken', () => r.heldCount('hold-e1') + r.heldCount('hold-e2') === 2);
      const waiting = ['x1', 'x2', 'y'].map((cid) => r.send(cniRequest('DEL', cid)));
      await until('three DELs wait', () => r.admission.stats.delsWaiting === 3);
      // The engine tears x1 and x2 down meanwhile (another DEL of theirs, say).
      r.tombstoned.add('x1');
      r.tombstoned.add('x2');
      r.release('hold-e1');
      await until('the three served', () => waiting.every((c) => c.statuses().length === 1));
      // x1 and x2 go as tombstoned DELs (cap 2, no pace at 0 ms), y takes the freed engine slot.
      assert.deepEqual(r.served.slice(-3), ['DEL x1', 'DEL x2', 'DEL y']);
      assert.equal(r.admission.stats.delsAnsweredEarly, 2);
      r.release('hold-e2');
      await until('all answered', () => slots.every((c) => c.statuses().length === 1));
      await until('counters at rest', atRest(r));
    }),
  );
});
