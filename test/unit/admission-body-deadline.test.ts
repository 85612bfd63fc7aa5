// routes/admission.ts's body deadline on a real HTTP server over a Unix socket, without root: a
// hinted request whose body has not come BODY_DEADLINE_MS after its headers is answered 11
// (TryAgainLater) and its connection closed, on whichever path it is (parked, served raw, or handed
// to fastify), which releases what it holds; a body that came in full, however slowly or however
// long it then waits or is served, is not touched; one answered before its body is in has its
// connection closed at the deadline all the same, or at the deadline from its answer when that
// answer waited behind another (node reads its body only then). Every case has its own server and runs side by
// side with the others, so the file takes one deadline (about 7 s), not one per case. Times are
// only asserted as lower bounds.

import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { type Socket } from 'node:net';
import { PROTOCOL_HEADER } from '@cni-steward/shared';
import {
  Admission,
  BODY_DEADLINE_MS,
  withBodyDeadline,
  type AdmissionOptions,
  type AdmissionStats,
} from '../../daemon/src/routes/admission.js';
import {
  cniRequest,
  fakeServe,
  openRig,
  openServerRig,
  until as untilHolds,
  whole,
  type AdmissionRig,
  type CniRequestOptions,
  type Conn,
} from '../helpers/admission-rig.js';

const TIMEOUT = { timeout: 20000 };
/** Timers may fire a little early by performance.now(); lower bounds allow this much. */
const SLACK_MS = 20;
const DEADLINE_MESSAGE = `request body not received within ${BODY_DEADLINE_MS} ms`;

/** A request header that makes the stand-in for fastify's handler begin its answer before the body is in. */
const BEGIN_ANSWER = 'x-test-begin-answer';
/** A request header that makes the stand-in answer 404 at once, its body unread (as fastify does). */
const ANSWER_AT_ONCE = 'x-test-answer-at-once';
/** Like ANSWER_AT_ONCE, with 2 MiB of answer: more than a client that reads nothing lets be written. */
const ANSWER_BIG_AT_ONCE = 'x-test-answer-big-at-once';
/** A request header that makes the stand-in neither read the body nor answer (node buffers it unread). */
const IGNORE_BODY = 'x-test-ignore-body';

/** Waits here are polled every 10 ms, and bounded by performance.now(). */
const until = (what: string, cond: () => boolean, ms = 15000) =>
  untilHolds(what, cond, ms, { everyMs: 10, clock: () => performance.now() });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Sleeps until `ms` after `t0` (performance.now()). */
const sleepUntil = (t0: number, ms: number) => sleep(t0 + ms - performance.now());

/** A request whose body stops halfway: the headers promise all of it, then nothing comes. */
function stalled(command: string, containerId: string, o: CniRequestOptions = {}) {
  const { head, body } = cniRequest(command, containerId, o);
  const half = Math.floor(body.length / 2);
  return { text: head + body.slice(0, half), rest: body.slice(half) };
}

interface Rig extends AdmissionRig {
  /** The stats as each connection closed, taken before the admission hears of the close. */
  closes: AdmissionStats[];
}

/**
 * An Admission on its own server in its own temp dir (test/helpers/admission-rig.ts), all closed
 * when the test ends (passed or not). Container ids starting with `hold` are held in `serve` until
 * released; `big` ones are answered with 2 MiB. The handler standing in for fastify reads the body
 * and answers 200, or, as its request's headers say, begins a chunked answer at once (BEGIN_ANSWER),
 * answers 404 at once, its body unread (ANSWER_AT_ONCE, ANSWER_BIG_AT_ONCE), or does nothing (IGNORE_BODY).
 */
async function rig(t: TestContext, o: Partial<AdmissionOptions> = {}): Promise<Rig> {
  const engine = fakeServe(
    (cid) => cid.startsWith('hold'),
    (cid) => (cid.startsWith('big') ? `{"pad":"${'x'.repeat(2 << 20)}"}` : '{}'),
  );
  const admission = new Admission({
    maxDels: 1,
    maxDelsWhileAdding: 1,
    tombstonePaceMs: 1,
    priorityMs: 50,
    maxBodyBytes: 1 << 20,
    isTombstoned: () => false,
    serve: engine.serve,
    ...o,
  });
  const fastify = (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers[ANSWER_AT_ONCE]) return void res.writeHead(404, { 'content-length': 0 }).end();
    if (req.headers[ANSWER_BIG_AT_ONCE]) return void res.writeHead(404).end('x'.repeat(2 << 20));
    if (req.headers[IGNORE_BODY]) return;
    if (req.headers[BEGIN_ANSWER]) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.flushHeaders();
      return;
    }
    req.resume();
    req.once('end', () => res.writeHead(200, { 'content-length': 0 }).end());
  };
  const closes: AdmissionStats[] = [];
  const r = await openRig({
    tmpPrefix: 'steward-admission-deadline-',
    admission,
    engine,
    next: fastify,
    // Registered before any request on the connection, so it runs before the admission's own listener.
    onConnection: (sock: Socket) => sock.once('close', () => closes.push(admission.stats)),
  });
  t.after(r.close);
  return { ...r, closes };
}

/** Asserts the connection's one answer is the deadline's: 503, CNI code 11, naming the deadline. */
function assertDeadlineAnswer(c: Conn, what: string): void {
  const answers = c.answers();
  assert.equal(answers.length, 1, `${what}: one answer`);
  const [a] = answers;
  assert.equal(a?.status, 503, `${what}: 503`);
  const err = JSON.parse(a?.body ?? '') as { code: number; msg: string };
  assert.equal(err.code, 11, `${what}: TryAgainLater`);
  assert.ok(err.msg.includes(DEADLINE_MESSAGE), `${what}: ${err.msg}`);
}

describe('the body deadline of hinted requests (and of unhinted ones)', { concurrency: true }, () => {
  it(
    'a stalled DEL waiting for a slot and a stalled ADD are answered 11 at the deadline and closed; the DEL waiting ahead keeps its place',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const holder = r.send(whole('DEL', 'hold-h')); // the one engine DEL slot, served past the deadline
      await until('the first DEL held', () => r.isHeld('hold-h'));
      const waiting = r.send(whole('DEL', 'w')); // whole body in, waits for the slot past the deadline
      await until('a DEL waiting', () => r.admission.stats.delsWaiting === 1);
      const t0 = performance.now();
      const del = stalled('DEL', 'stalled-del');
      const stalledDel = r.send(del.text);
      await until('the stalled DEL waiting behind it', () => r.admission.stats.delsWaiting === 2);
      const stalledAdd = r.send(stalled('ADD', 'stalled-add').text);
      await until('the stalled ADD in flight', () => r.admission.stats.othersInFlight === 1);

      await until('both stalled connections closed', () => [stalledDel, stalledAdd].every((c) => c.closedAt()));
      for (const c of [stalledDel, stalledAdd]) {
        assert.ok((c.closedAt() ?? 0) - t0 >= BODY_DEADLINE_MS - SLACK_MS, 'not before the deadline');
      }
      assertDeadlineAnswer(stalledDel, 'the stalled DEL');
      assertDeadlineAnswer(stalledAdd, 'the stalled ADD');
      await until('the stalled ADD no longer in flight', () => r.admission.stats.othersInFlight === 0);
      assert.equal(r.admission.stats.delsWaiting, 1, 'the DEL that came first still waits, alone');
      assert.equal(r.admission.stats.delsAdmitted, 1);
      assert.deepEqual(holder.answers(), [], 'the held DEL is still being served');
      assert.deepEqual(waiting.answers(), []);

      r.release('hold-h');
      await until('both whole DELs answered', () => holder.answers().length === 1 && waiting.answers().length === 1);
      assert.equal(holder.answers()[0]?.status, 200, 'served past the deadline, still answered 200');
      assert.equal(waiting.answers()[0]?.status, 200, 'waited past the deadline, then served');
      assert.deepEqual(r.served, ['DEL hold-h', 'DEL w'], 'the stalled requests are never served');
      for (const c of [holder, waiting]) c.sock.destroy();
      await until(`counters at rest (${JSON.stringify(r.admission.stats)})`, r.atRest);
    },
  );

  it(
    'after the 11 the connection is closed: the rest of the body and a next request sent on it are not served',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const add = stalled('ADD', 'keepalive');
      let followed = false;
      // As soon as the answer arrives, the client sends the rest of the body and another request.
      const c = r.send(add.text, (client) => {
        if (followed || client.answers().length === 0) return;
        followed = true;
        client.sock.write(add.rest + whole('DEL', 'next'));
      });
      await until('the connection closed', () => c.closedAt() !== undefined);
      assertDeadlineAnswer(c, 'the stalled ADD');
      assert.ok(followed);
      await sleep(200);
      assert.deepEqual(r.served, []);
      await until('counters at rest', r.atRest);
    },
  );

  it('a stalled body sent chunked (no Content-Length) is stalled too', TIMEOUT, async (t) => {
    const r = await rig(t);
    const { head, body } = cniRequest('ADD', 'chunked', { chunked: true });
    const part = body.slice(0, 20);
    const c = r.send(`${head}${part.length.toString(16)}\r\n${part}\r\n`);
    await until('the ADD in flight', () => r.admission.stats.othersInFlight === 1);
    const t0 = performance.now();
    await until('the connection closed', () => c.closedAt() !== undefined);
    assertDeadlineAnswer(c, 'the chunked ADD');
    assert.ok((c.closedAt() ?? 0) - t0 < BODY_DEADLINE_MS + 2500, 'at the deadline, not one later');
    assert.deepEqual(r.served, []);
    await until('counters at rest', r.atRest);
  });

  it(
    'a DEL that waited for a slot with a full buffer of body, then stopped, gets a deadline of its own once admitted',
    TIMEOUT,
    async (t) => {
      const deadline = 1000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const holder = r.send(whole('DEL', 'hold-slot')); // the one engine DEL slot
      await until('the slot held', () => r.isHeld('hold-slot'));
      const t0 = performance.now();
      const { head, body } = cniRequest('DEL', 'full-buffer', { pad: 200 * 1024 });
      const big = r.send(head);
      await until('the DEL waiting', () => r.admission.stats.delsWaiting === 1 && r.reqs.length === 2);
      const req = r.reqs[1] as IncomingMessage;
      // More than node buffers unread while it waits: at its deadline the buffer is full, no stall.
      big.sock.write(body.slice(0, req.readableHighWaterMark + 10));
      await sleepUntil(t0, deadline + 500);
      assert.equal(big.closedAt(), undefined, 'a full buffer while waiting is not a stall');
      r.release('hold-slot');
      await until('the slot answered', () => holder.answers().length === 1);
      const admitted = performance.now();
      // Admitted, its body is read on and stops: the slot must not be held until node:http's timeout.
      await until('the DEL that stopped answered and closed', () => big.closedAt() !== undefined);
      assert.ok((big.closedAt() ?? 0) - admitted >= deadline / 2, 'a deadline from its admission, not at once');
      const answers = big.answers();
      assert.equal(answers.length, 1);
      assert.equal(answers[0]?.status, 503);
      const err = JSON.parse(answers[0]?.body ?? '') as { code: number; msg: string };
      assert.equal(err.code, 11);
      assert.ok(err.msg.includes(`request body not received within ${deadline} ms`), err.msg);
      assert.deepEqual(r.served, ['DEL hold-slot'], 'the DEL that stopped is never served');
      holder.sock.destroy();
      await until(`counters at rest (${JSON.stringify(r.admission.stats)})`, r.atRest);
    },
  );

  it(
    'a body that comes in full a little before the deadline, served past it (a slow plugin), is answered 200',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const add = stalled('ADD', 'hold-slow');
      const t0 = performance.now();
      const c = r.send(add.text);
      await sleepUntil(t0, BODY_DEADLINE_MS - 1500);
      assert.deepEqual(c.answers(), []);
      c.sock.write(add.rest);
      await until('the ADD served', () => r.isHeld('hold-slow'));
      await sleepUntil(t0, BODY_DEADLINE_MS + 1500);
      assert.deepEqual(c.answers(), [], 'still being served');
      assert.equal(c.closedAt(), undefined, 'its connection still open');
      assert.equal(r.admission.stats.othersInFlight, 1);
      r.release('hold-slow');
      await until('the ADD answered', () => c.answers().length === 1);
      assert.equal(c.answers()[0]?.status, 200);
      // The connection is still good for the next request.
      c.sock.write(whole('DEL', 'after'));
      await until('the next request answered', () => c.answers().length === 2);
      assert.equal(c.answers()[1]?.status, 200);
      c.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    "a DEL waiting for its slot past two deadlines, its whole body sent and filling node's buffer, is served once admitted",
    TIMEOUT,
    async (t) => {
      const deadline = 1000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const holder = r.send(whole('DEL', 'hold-slot'));
      await until('the slot held', () => r.isHeld('hold-slot'));
      const t0 = performance.now();
      const { head, body } = cniRequest('DEL', 'full-buffer', { pad: 200 * 1024 });
      const big = r.send(head);
      await until('the big DEL waiting', () => r.admission.stats.delsWaiting === 1 && r.reqs.length === 2);
      const req = r.reqs[1] as IncomingMessage;
      const hwm = req.readableHighWaterMark;
      assert.ok(body.length > hwm + 1000, `the body (${body.length} bytes) is larger than node's buffer (${hwm})`);
      // Exactly a buffer's worth first (node then stops reading), the rest once it is in.
      big.sock.write(body.slice(0, hwm));
      await until('node buffered exactly its high-water mark', () => req.readableLength === hwm);
      big.sock.write(body.slice(hwm));
      // Past two deadlines: a parked request is not cut for a full buffer however long it waits.
      await sleepUntil(t0, 2.5 * deadline);
      assert.equal(req.complete, false, 'the body is not all read: it waits in the buffer and the socket');
      assert.deepEqual(big.answers(), [], 'not answered while it waits');
      assert.equal(big.closedAt(), undefined);
      assert.equal(r.admission.stats.delsWaiting, 1);
      r.release('hold-slot');
      await until('the big DEL answered', () => big.answers().length === 1);
      assert.equal(big.answers()[0]?.status, 200);
      assert.deepEqual(r.served, ['DEL hold-slot', 'DEL full-buffer']);
      for (const c of [holder, big]) c.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    "a hinted request handed to fastify's handler (not JSON) is under the deadline too, and so is an unhinted one (curl's)",
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const t0 = performance.now();
      const hinted = r.send(stalled('DEL', 'text', { contentType: 'text/plain' }).text);
      const unhinted = r.send(stalled('DEL', 'plain', { hints: false }).text);
      await until('the hinted request answered and closed', () => hinted.closedAt() !== undefined);
      assertDeadlineAnswer(hinted, 'the hinted text/plain DEL');
      // It was left to the HTTP server, and held its connection as long as its client kept it open.
      await until('the unhinted request answered and closed', () => unhinted.closedAt() !== undefined);
      assertDeadlineAnswer(unhinted, 'the unhinted DEL');
      assert.ok((unhinted.closedAt() ?? 0) - t0 < BODY_DEADLINE_MS + 1500, 'closed at its deadline');
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a request answered before its body came (a 404, a refused variant, a refused protocol) has its connection closed at the deadline',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const t0 = performance.now();
      const pad = 1000; // more body than the trickle sends
      const early = [
        stalled('DEL', 'not-found', { pad, hints: false, extra: { [ANSWER_AT_ONCE]: '1' } }),
        stalled('DEL', 'variant', { pad, target: '/v1/cni?x=1' }),
        stalled('DEL', 'skew', { pad, extra: { [PROTOCOL_HEADER]: '999' } }),
      ].map((s) => r.send(s.text));
      // A byte of body every 500 ms: the connection is never idle, so node's keep-alive timeout never ends it.
      const trickle = setInterval(() => {
        for (const c of early) if (!c.closed()) c.sock.write(' ');
      }, 500);
      t.after(() => clearInterval(trickle));
      await until('all three answered', () => early.every((c) => c.answers().length === 1));
      assert.deepEqual(
        early.map((c) => c.answers()[0]?.status),
        [404, 400, 409],
      );
      // Answered, but the rest of each body never comes: it held its connection until node:http's
      // request timeout (300 s).
      await until('all three closed', () => early.every((c) => c.closedAt() !== undefined));
      for (const c of early) {
        assert.ok((c.closedAt() ?? 0) - t0 >= BODY_DEADLINE_MS - SLACK_MS, 'not before the deadline');
        // Its answer went out at once, so the deadline from its answer is the one from its headers.
        assert.ok((c.closedAt() ?? 0) - t0 < BODY_DEADLINE_MS + 2500, 'at the deadline, not one later');
        assert.equal(c.answers().length, 1, 'answered once');
      }
      assert.deepEqual(r.served, []);
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a pipelined request answered at once behind a slow one, its whole body sent but held back by node, is not cut: node reads that body only once its answer is written',
    TIMEOUT,
    async (t) => {
      const deadline = 1000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      // Far more body than node buffers unread: the rest waits in the socket until the answer ahead is written.
      const b = cniRequest('DEL', 'at-once', { pad: 400 * 1024, hints: false, extra: { [ANSWER_AT_ONCE]: '1' } });
      const t0 = performance.now();
      const c = r.send(whole('ADD', 'hold-ahead') + b.text + whole('DEL', 'after'));
      await until('the first held', () => r.isHeld('hold-ahead'));
      await sleepUntil(t0, deadline + 1500);
      r.release('hold-ahead');
      await until('all three answered', () => c.answers().length === 3);
      assert.deepEqual(
        c.answers().map((a) => a.status),
        [200, 404, 200],
      );
      await sleep(deadline + 300);
      assert.equal(c.closedAt(), undefined, 'the connection is still good');
      assert.deepEqual(r.served, ['ADD hold-ahead', 'DEL after']);
      c.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a pipelined request answered at once behind one served past the deadline, the rest of its body trickled and never finished, is closed the deadline after its answer goes out',
    TIMEOUT,
    async (t) => {
      const deadline = 2000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const b = cniRequest('DEL', 'never-rest', { hints: false, pad: 1000, extra: { [ANSWER_AT_ONCE]: '1' } });
      const t0 = performance.now();
      const c = r.send(whole('ADD', 'hold-past') + b.head + b.body.slice(0, 10));
      // A byte of body every 500 ms: never idle, so node's keep-alive timeout does not end it either.
      const trickle = setInterval(() => {
        if (!c.closed()) c.sock.write(' ');
      }, 500);
      t.after(() => clearInterval(trickle));
      await until('the first held', () => r.isHeld('hold-past'));
      await sleepUntil(t0, deadline + 300);
      assert.equal(c.closedAt(), undefined, 'its answer still queued: left alone');
      const released = performance.now();
      r.release('hold-past');
      await until('both answered', () => c.answers().length === 2);
      assert.deepEqual(
        c.answers().map((a) => a.status),
        [200, 404],
      );
      await until('the connection closed', () => c.closedAt() !== undefined);
      assert.ok((c.closedAt() ?? 0) - released >= deadline - SLACK_MS, 'the deadline after its answer');
      assert.deepEqual(r.served, ['ADD hold-past']);
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a stalled request whose handler has begun its answer is not answered again; its connection is closed a second after the deadline',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const t0 = performance.now();
      const c = r.send(stalled('ADD', 'begun', { contentType: 'text/plain', extra: { [BEGIN_ANSWER]: '1' } }).text);
      await until('the answer begun', () => c.answers().length === 1);
      await until('the connection closed', () => c.closedAt() !== undefined);
      assert.ok((c.closedAt() ?? 0) - t0 >= BODY_DEADLINE_MS + 1000 - SLACK_MS, 'a second after the deadline');
      assert.deepEqual(
        c.answers().map((a) => a.status),
        [200],
        'only the answer begun',
      );
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a client that gives up on its stalled requests before the deadline releases what they held at once; the deadline then changes nothing',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const holder = r.send(whole('DEL', 'hold-g'));
      await until('the slot held', () => r.isHeld('hold-g'));
      const t0 = performance.now();
      const del = r.send(stalled('DEL', 'gone-del').text);
      await until('the stalled DEL waiting', () => r.admission.stats.delsWaiting === 1);
      const add = r.send(stalled('ADD', 'gone-add').text);
      await until('the stalled ADD in flight', () => r.admission.stats.othersInFlight === 1);
      del.sock.destroy();
      add.sock.destroy();
      await until('both released', () => r.admission.stats.delsWaiting === 0 && r.admission.stats.othersInFlight === 0);
      const waiting = r.send(whole('DEL', 'w-g'));
      await until('another DEL waiting', () => r.admission.stats.delsWaiting === 1);
      await sleepUntil(t0, BODY_DEADLINE_MS + 1500);
      assert.deepEqual(holder.answers(), [], 'the held DEL still being served');
      assert.equal(holder.closedAt(), undefined);
      assert.deepEqual(waiting.answers(), [], 'the other DEL still waiting for the slot');
      assert.equal(r.admission.stats.delsWaiting, 1);
      r.release('hold-g');
      await until('both answered', () => holder.answers().length === 1 && waiting.answers().length === 1);
      assert.deepEqual(
        [holder, waiting].map((c) => c.answers()[0]?.status),
        [200, 200],
      );
      assert.deepEqual(r.served, ['DEL hold-g', 'DEL w-g']);
      for (const c of [holder, waiting]) c.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a client that never reads: a stalled request pipelined behind an unread answer is still closed, its counters released',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const t0 = performance.now();
      // 2 MiB answered to the first, never read; the second's 11 cannot even be written.
      const c = r.send(whole('ADD', 'big-answer') + stalled('ADD', 'stalled-behind').text);
      c.sock.pause();
      await until('both ADDs in flight', () => r.admission.stats.othersInFlight === 2 && r.served.length === 1);
      await until('both released', () => r.admission.stats.othersInFlight === 0);
      assert.ok(performance.now() - t0 >= BODY_DEADLINE_MS + 1000 - SLACK_MS, 'a second after the deadline');
      assert.deepEqual(r.served, ['ADD big-answer']);
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a stalled DEL whose 11 cannot be written (its client reads nothing) leaves the queue at the deadline, not a second later',
    TIMEOUT,
    async (t) => {
      const r = await rig(t);
      const holder = r.send(whole('DEL', 'hold-q'));
      await until('the slot held', () => r.isHeld('hold-q'));
      const t0 = performance.now();
      const c = r.send(whole('ADD', 'big-answer-q') + stalled('DEL', 'stalled-queued').text);
      c.sock.pause();
      await until(
        'the ADD served, the DEL waiting',
        () => r.admission.stats.delsWaiting === 1 && r.served.length === 2,
      );
      await until('the connection closed', () => r.closes.length === 1);
      assert.ok(performance.now() - t0 >= BODY_DEADLINE_MS + 1000 - SLACK_MS, 'a second after the deadline');
      const atClose = r.closes[0];
      assert.equal(atClose?.delsWaiting, 0, 'the stalled DEL left the queue at the deadline');
      assert.equal(atClose?.othersInFlight, 1, 'the ADD before it was in flight until the connection closed');
      await until('the ADD released', () => r.admission.stats.othersInFlight === 0);
      r.release('hold-q');
      await until('the held DEL answered', () => holder.answers().length === 1);
      assert.equal(holder.answers()[0]?.status, 200);
      assert.deepEqual(r.served, ['DEL hold-q', 'ADD big-answer-q']);
      holder.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a pipelined request answered at once behind a slow one that ends before the deadline has the deadline from its answer: a body sent after the deadline from its headers is read, one never sent is cut',
    TIMEOUT,
    async (t) => {
      const deadline = 2000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const late = (id: string) => {
        const b = cniRequest('DEL', id, { hints: false, extra: { [ANSWER_AT_ONCE]: '1' } });
        return { text: b.head + b.body.slice(0, 10), rest: b.body.slice(10) };
      };
      const sent = late('rest-sent');
      const never = late('rest-never');
      let readAt: number | undefined;
      const t0 = performance.now();
      // The client sends the rest of its body (and a request after it) 0.7 of a deadline after it
      // reads its 404: past the deadline from its headers, within the one from its answer.
      const c = r.send(whole('ADD', 'hold-a1') + sent.text, (client) => {
        if (readAt !== undefined || client.answers().length < 2) return;
        readAt = performance.now();
        setTimeout(() => client.sock.write(sent.rest + whole('DEL', 'after')), 0.7 * deadline);
      });
      const cut = r.send(whole('ADD', 'hold-a2') + never.text);
      await until('both ahead held', () => r.isHeld('hold-a1') && r.isHeld('hold-a2'));
      await sleepUntil(t0, 0.6 * deadline);
      const released = performance.now();
      r.release('hold-a1');
      r.release('hold-a2');
      await until('all three answered', () => c.answers().length === 3);
      assert.ok(readAt !== undefined && readAt - t0 < deadline, 'the 404 read before the deadline from its headers');
      assert.deepEqual(
        c.answers().map((a) => a.status),
        [200, 404, 200],
      );
      assert.equal(c.closedAt(), undefined, 'its body, sent past the deadline from its headers, was read');
      await until('the one whose body never came closed', () => cut.closedAt() !== undefined);
      assert.ok((cut.closedAt() ?? 0) - released >= deadline - SLACK_MS, 'not before the deadline from its answer');
      assert.deepEqual(
        cut.answers().map((a) => a.status),
        [200, 404],
      );
      assert.deepEqual(r.served.sort(), ['ADD hold-a1', 'ADD hold-a2', 'DEL after']);
      c.sock.destroy();
      await until('counters at rest', r.atRest);
    },
  );

  it(
    'a request answered at once whose client reads nothing and sends no more body is closed a second after the deadline (pipelined: a second after its answer goes out)',
    TIMEOUT,
    async (t) => {
      const deadline = 1000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const unread = (id: string) => stalled('DEL', id, { hints: false, extra: { [ANSWER_BIG_AT_ONCE]: '1' } }).text;
      const t0 = performance.now();
      const alone = r.send(unread('unread'));
      const behind = r.send(whole('ADD', 'hold-u') + unread('unread-behind'));
      for (const c of [alone, behind]) c.sock.pause();
      // Its answer cannot all be written, so it never finishes: it held the connection until node:http's timeout.
      await until('the first connection closed', () => r.closes.length === 1);
      assert.ok(performance.now() - t0 >= deadline + 1000 - SLACK_MS, 'a second after the deadline');
      await sleepUntil(t0, deadline + 1500);
      assert.equal(r.closes.length, 1, 'the pipelined one, its answer still queued, is left alone');
      const released = performance.now();
      r.release('hold-u');
      await until('the pipelined one closed', () => r.closes.length === 2);
      assert.ok(performance.now() - released >= 1000 - SLACK_MS, 'a second after its answer went out');
      assert.deepEqual(r.served, ['ADD hold-u']);
      await until('counters at rest', r.atRest);
    },
  );

  it(
    "a request whose handler leaves its body unread in node's full buffer, the rest not sent, is answered 11 and closed one deadline later",
    TIMEOUT,
    async (t) => {
      const deadline = 1000;
      const r = await rig(t, { bodyDeadlineMs: deadline });
      const { head, body } = cniRequest('ADD', 'unread-body', {
        pad: 200 * 1024,
        contentType: 'text/plain',
        extra: { [IGNORE_BODY]: '1' },
      });
      const t0 = performance.now();
      const c = r.send(head);
      await until('the ADD in flight', () => r.admission.stats.othersInFlight === 1 && r.reqs.length === 1);
      const req = r.reqs[0] as IncomingMessage;
      c.sock.write(body.slice(0, req.readableHighWaterMark + 10));
      await until('the connection closed', () => c.closedAt() !== undefined);
      assert.ok((c.closedAt() ?? 0) - t0 >= 2 * deadline - SLACK_MS, 'a full buffer is given one more deadline');
      const answers = c.answers();
      assert.equal(answers.length, 1);
      assert.equal(answers[0]?.status, 503);
      const err = JSON.parse(answers[0]?.body ?? '') as { code: number; msg: string };
      assert.equal(err.code, 11);
      assert.deepEqual(r.served, []);
      await until('counters at rest', r.atRest);
    },
  );
});

describe('the body deadline of a server without admission (the degraded daemon, withBodyDeadline)', () => {
  it(
    'a stalled POST /v1/cni is answered 11, any other stalled request 408, each at its deadline (a body left unread in a full buffer one later) and closed; a whole one is served',
    TIMEOUT,
    async (t) => {
      const deadline = 500;
      // Stands in for fastify: reads the body, then answers 200.
      const r = await openServerRig({
        tmpPrefix: 'steward-body-deadline-',
        listener: withBodyDeadline((req, res) => {
          if (req.headers[IGNORE_BODY]) return;
          req.resume();
          req.once('end', () => res.writeHead(200, { 'content-length': 0 }).end());
        }, deadline),
      });
      t.after(() => r.close());
      const send = (text: string) => r.send(text);
      const t0 = performance.now();
      const cni = send(stalled('ADD', 'c', { hints: false }).text);
      const other = send(stalled('ADD', 'o', { hints: false, target: '/v1/teardowns/retry' }).text);
      const put = send(stalled('ADD', 'p', { hints: false, method: 'PUT' }).text);
      const served = send(whole('ADD', 'w'));
      // Its handler leaves it unread: node's buffer fills, which is no stall, so it gets one more deadline.
      const full = cniRequest('ADD', 'f', { hints: false, pad: 200 * 1024, extra: { [IGNORE_BODY]: '1' } });
      const unread = send(full.head + full.body.slice(0, 100 * 1024));
      const conns = [cni, other, put, unread];
      await until('the stalled four closed', () => conns.every((c) => c.closed()));
      for (const c of conns) assert.ok((c.closedAt() ?? 0) - t0 >= deadline - SLACK_MS, 'not before the deadline');
      assert.ok((unread.closedAt() ?? 0) - t0 >= 2 * deadline - SLACK_MS, 'a full buffer: one deadline more');
      assert.match(unread.text(), /^HTTP\/1\.1 503 /, unread.text());
      const why = `request body not received within ${deadline} ms`;
      assert.equal(cni.answers()[0]?.status, 503, cni.text());
      const err = JSON.parse(cni.answers()[0]?.body ?? '') as { code: number; msg: string };
      assert.equal(err.code, 11);
      assert.ok(err.msg.includes(why), err.msg);
      for (const c of [other, put]) {
        assert.match(c.text(), /^HTTP\/1\.1 408 /, c.text());
        assert.ok(c.text().endsWith(JSON.stringify({ error: why })), c.text());
      }
      assert.match(served.text(), /^HTTP\/1\.1 200 /);
      assert.equal(served.closedAt(), undefined, 'a whole request keeps its connection');
    },
  );
});
