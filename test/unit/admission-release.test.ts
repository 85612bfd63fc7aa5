// routes/admission.ts on a real HTTP server over a Unix socket, without root: what a hostile client
// does to its counters and queue. Pipelined requests queued behind a held one whose client goes away
// release what they took (a queued response never emits 'close'); a DEL of a container whose ADD is
// held is admitted at once and does not take the engine DEL slot; a held engine DEL does not hold up
// a tombstoned one.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CNI_ROUTE } from '@cni-steward/shared';
import { Admission } from '../../daemon/src/routes/admission.js';
import { fakeServe, openRig, whole as request, type AdmissionRig } from '../helpers/admission-rig.js';

/** One server for the whole file (test/helpers/admission-rig.ts); serve holds ids starting with "hold". */
const engine = fakeServe((cid) => cid.startsWith('hold'));
/** Requests the test holds open by container id, answered when it says so. */
const { held, served } = engine;
const skews: string[] = [];
let rig: AdmissionRig;
let admission: Admission;

before(async () => {
  admission = new Admission({
    maxDels: 2,
    maxDelsWhileAdding: 1,
    tombstonePaceMs: 1,
    priorityMs: 50,
    maxBodyBytes: 1 << 20,
    isTombstoned: (h) => h.command === 'DEL' && (h.containerId ?? '').startsWith('tomb'),
    // The engine still runs an ADD of these (its client gave up on it).
    hasAddOrCheck: (cid) => cid.startsWith('engine-adding'),
    onSkew: (v) => skews.push(v),
    serve: engine.serve,
  });
  rig = await openRig({
    tmpPrefix: 'steward-admission-release-',
    admission,
    engine,
    next: (_req, res) => {
      res.writeHead(500).end();
    },
  });
});
after(() => rig.close());

/** Writes requests on one connection of their own. */
const send = (text: string) => rig.send(text);

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

const atRest = () => rig.atRest();

describe('a hostile client and the admission counters', () => {
  it('pipelined requests behind a held ADD, then the client goes away: every counter is released', async () => {
    const c = send(request('ADD', 'hold-p1') + request('ADD', 'p2') + request('DEL', 'p3') + request('DEL', 'tomb-p4'));
    await until('the held ADD served, the rest read', () => held.has('hold-p1') && served.includes('ADD p2'));
    assert.ok(admission.stats.othersInFlight >= 1);
    c.sock.destroy();
    await until(`counters at rest (${JSON.stringify(admission.stats)})`, atRest);
    held.get('hold-p1')?.[0]?.('{}');
    held.delete('hold-p1');
    await until('ADD priority over', () => !admission.stats.addPriority);
  });

  it('a DEL of a container whose ADD is held is admitted at once, not in the engine DEL slot', async () => {
    const add = send(request('ADD', 'hold-a'));
    await until('the ADD held', () => held.has('hold-a'));
    const del = send(request('DEL', 'hold-a'));
    await until('the DEL admitted and served', () => (held.get('hold-a') ?? []).length === 2);
    // The one engine DEL slot (1 while adding) is still free for another container's DEL.
    const other = send(request('DEL', 'other-b'));
    await until('the other DEL answered', () => other.statuses().length === 1);
    assert.deepEqual(other.statuses(), [200]);
    for (const answer of held.get('hold-a') ?? []) answer('{}');
    held.delete('hold-a');
    await until('ADD and DEL answered', () => add.statuses().length === 1 && del.statuses().length === 1);
    for (const c of [add, del, other]) c.sock.destroy();
    await until('counters at rest', atRest);
  });

  it('a held engine DEL does not hold up a tombstoned DEL behind it', async () => {
    const add = send(request('ADD', 'hold-x'));
    await until('the ADD held', () => held.has('hold-x'));
    const slow = send(request('DEL', 'hold-y')); // takes the one engine DEL slot while adding
    await until('the engine DEL held', () => held.has('hold-y'));
    const waiting = send(request('DEL', 'z')); // waits for that slot
    await until('an engine DEL waiting', () => admission.stats.delsWaiting === 1);
    const tomb = send(request('DEL', 'tomb-z'));
    await until('the tombstoned DEL answered', () => tomb.statuses().length === 1);
    assert.equal(admission.stats.delsWaiting, 1, 'the engine DEL still waits');
    for (const cid of ['hold-x', 'hold-y']) for (const answer of held.get(cid) ?? []) answer('{}');
    held.clear();
    await until('all answered', () => [add, slow, waiting].every((c) => c.statuses().length === 1));
    for (const c of [add, slow, waiting, tomb]) c.sock.destroy();
    await until('counters at rest', atRest);
  });
});

describe('which requests the admission serves, and what its stats say', () => {
  /** One raw request on its own connection: its status line's code once answered. */
  async function statusOf(text: string): Promise<number> {
    const c = send(text);
    await until('answered', () => c.statuses().length === 1);
    c.sock.destroy();
    return c.statuses()[0] ?? 0;
  }

  it('names its caps', () => {
    assert.equal(admission.stats.maxDels, 2);
    assert.equal(admission.stats.maxDelsWhileAdding, 1);
  });

  it("a request without hints, or a hinted one not sent as JSON, goes to fastify's handler", async () => {
    const plain = request('DEL', 'tomb-plain').replace(/^x-cni-[^\r]*\r\n/gim, '');
    assert.ok(!/x-cni-/i.test(plain.split('\r\n\r\n')[0] ?? ''), 'no hint left');
    assert.equal(await statusOf(plain), 500, 'no hints: fastify');
    const text = request('DEL', 'tomb-text').replace('content-type: application/json', 'content-type: text/plain');
    assert.equal(await statusOf(text), 500, 'not JSON: fastify');
    assert.equal(await statusOf('GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n'), 500, 'another route: fastify');
    assert.ok(!served.includes('DEL tomb-plain') && !served.includes('DEL tomb-text'));
  });

  it('another spelling of the CNI route is refused before anything else, never served', async () => {
    const variant = request('DEL', 'tomb-variant').replace(`POST ${CNI_ROUTE} `, `POST ${CNI_ROUTE}?x=1 `);
    assert.equal(await statusOf(variant), 400);
    assert.ok(!served.includes('DEL tomb-variant'));
  });

  it('a tombstoned DEL is answered at admission and counted as answered early', async () => {
    const before = admission.stats.delsAnsweredEarly;
    assert.equal(await statusOf(request('DEL', 'tomb-count')), 200);
    assert.equal(admission.stats.delsAnsweredEarly, before + 1);
    // An engine DEL is not.
    assert.equal(await statusOf(request('DEL', 'engine-count')), 200);
    assert.equal(admission.stats.delsAnsweredEarly, before + 1);
  });

  it('with no ADD in flight, engine DELs take at most maxDels slots; the next waits for one to be answered', async () => {
    const dels = ['hold-d1', 'hold-d2', 'hold-d3'].map((cid) => send(request('DEL', cid)));
    await until(
      'two admitted, one waiting',
      () => admission.stats.delsAdmitted === 2 && admission.stats.delsWaiting === 1,
    );
    assert.ok(held.has('hold-d1') && held.has('hold-d2') && !held.has('hold-d3'));
    held.get('hold-d1')?.[0]?.('{}');
    await until('the third admitted once the first is answered', () => held.has('hold-d3'));
    for (const cid of ['hold-d2', 'hold-d3']) held.get(cid)?.[0]?.('{}');
    held.clear();
    await until('all answered', () => dels.every((c) => c.statuses().length === 1));
    for (const c of dels) c.sock.destroy();
    await until('counters at rest', atRest);
  });

  it('a shim speaking another protocol is refused (409) and told to the daemon, its body never served', async () => {
    const old = request('DEL', 'tomb-skew').replace(/^x-steward-protocol: [^\r]*\r\n/im, 'x-steward-protocol: 1\r\n');
    assert.equal(await statusOf(old), 409);
    assert.deepEqual(skews, ['1']);
    assert.ok(!served.includes('DEL tomb-skew'));
  });

  it('malformed hints on the CNI route go to fastify, which refuses them itself', async () => {
    const bad = request('DEL', 'tomb-bad').replace(/^x-cni-containerid: [^\r]*\r\n/im, 'x-cni-containerid: %zz\r\n');
    assert.equal(await statusOf(bad), 500);
    assert.ok(!served.includes('DEL tomb-bad'));
  });

  it('a DEL of a container whose ADD the engine still runs is admitted at once, even with every DEL slot taken', async () => {
    const dels = ['hold-s1', 'hold-s2'].map((cid) => send(request('DEL', cid)));
    await until('both DEL slots taken', () => admission.stats.delsAdmitted === 2);
    const third = send(request('DEL', 'hold-s3'));
    await until('a third DEL waits', () => admission.stats.delsWaiting === 1);
    const behind = send(request('DEL', 'engine-adding-1'));
    await until('the DEL behind the ADD answered', () => behind.statuses().length === 1);
    assert.deepEqual(behind.statuses(), [200]);
    assert.equal(admission.stats.delsWaiting, 1, 'the third engine DEL still waits');
    for (const cid of ['hold-s1', 'hold-s2']) held.get(cid)?.[0]?.('{}');
    await until('the third admitted', () => held.has('hold-s3'));
    held.get('hold-s3')?.[0]?.('{}');
    held.clear();
    await until('all answered', () => [...dels, third].every((c) => c.statuses().length === 1));
    for (const c of [...dels, third, behind]) c.sock.destroy();
    await until('counters at rest', atRest);
  });

  it("a DEL stays uncapped behind its container's ADD while any one of that container's ADDs is in flight", async () => {
    const a1 = send(request('ADD', 'hold-m'));
    const a2 = send(request('ADD', 'hold-m'));
    await until('both ADDs held', () => (held.get('hold-m') ?? []).length === 2);
    held.get('hold-m')?.[0]?.('{}');
    await until('the first ADD answered', () => a1.statuses().length + a2.statuses().length === 1);
    const other = send(request('DEL', 'hold-o')); // the one engine DEL slot while adding
    await until('the other DEL holds the slot', () => held.has('hold-o'));
    const del = send(request('DEL', 'hold-m'));
    await until('the DEL behind the remaining ADD is served at once', () => (held.get('hold-m') ?? []).length === 3);
    for (const cid of ['hold-m', 'hold-o']) for (const answer of held.get(cid) ?? []) answer('{}');
    held.clear();
    await until('all answered', () => [a1, a2, other, del].every((c) => c.statuses().length === 1));
    for (const c of [a1, a2, other, del]) c.sock.destroy();
    await until('counters at rest', atRest);
  });
});
