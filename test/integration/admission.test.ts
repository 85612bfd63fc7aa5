// Admission before the body is parsed (daemon/src/routes/admission.ts), against a real stewardd:
// hints that disagree with the body are refused with code 4 and nothing runs; a DEL of a torn-down
// attachment is answered at admission; while slow DELs fill the DEL admission cap, an ADD is still
// admitted and answered; requests without hint headers (an older shim, curl) are served as before.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BODY_DEADLINE_MS } from '../../daemon/src/routes/admission.js';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, SYSTEM_CNI_BIN } from '../helpers/env.js';
import { delegate, fixturePlugin, hintedWire, stewardConf } from '../helpers/netconf.js';

const env = new TestEnv('admit');
const daemon = new Daemon(env);
let netns = '';
before(async () => {
  await daemon.start();
  netns = env.netns();
});
after(() => env.close());

/** The shim's body and hint headers for one call in this file's netns. */
function wire(command: string, containerId: string, conf: Record<string, unknown>) {
  return hintedWire(command, containerId, netns, conf, SYSTEM_CNI_BIN);
}

/** POST /v1/cni with the given headers (the shim's hints, altered ones, or none). */
function post(w: { body: string }, headers: Record<string, string>) {
  return daemon.request('POST', '/v1/cni', w.body, headers);
}

/** The fixture's "COMMAND containerId ifname" lines (it appends more fields, e.g. netns=). */
function delCalls(fx: string): string[] {
  return fixtureCalls(fx, 'DEL').map((l) => l.split(' ').slice(0, 3).join(' '));
}

async function admission(): Promise<{
  delsWaiting: number;
  delsAdmitted: number;
  delsAnsweredEarly: number;
  othersInFlight: number;
  maxDels: number;
}> {
  return (await daemon.status()).admission;
}

describe('hint headers that disagree with the body', () => {
  it('an ADD body sent with X-CNI-Command: DEL is refused with code 4, and nothing runs', async () => {
    const fx = join(env.dir, 'fx-lie-cmd');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('lienet', '1.0.0', [fixturePlugin(fx)])]);
    const w = wire('ADD', 'lie-cmd', conf);
    const res = await post(w, { ...w.hints, 'x-cni-command': 'DEL' });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.code, 4);
    assert.match(res.json.msg, /x-cni-command .*disagrees with the body/);
    assert.deepEqual(fixtureCalls(fx), []);
    assert.deepEqual(await daemon.get('/v1/attachments?containerId=lie-cmd').then((r) => r.json), []);
  });

  it('a DEL whose headers name a torn-down container but whose body names a live one is refused, the live one untouched', async () => {
    const fx = join(env.dir, 'fx-lie-cid');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('lienet2', '1.0.0', [fixturePlugin(fx)])]);
    // "gone" is torn down (a tombstone): its hints alone would be answered at admission.
    const gone = wire('ADD', 'lie-gone', conf);
    assert.equal((await post(gone, gone.hints)).status, 200);
    const goneDel = wire('DEL', 'lie-gone', conf);
    assert.equal((await post(goneDel, goneDel.hints)).status, 200);
    const live = wire('ADD', 'lie-live', conf);
    assert.equal((await post(live, live.hints)).status, 200);

    const liveDel = wire('DEL', 'lie-live', conf);
    const res = await post(liveDel, goneDel.hints);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.code, 4);
    assert.match(res.json.msg, /x-cni-containerid .*"lie-gone".*disagrees with the body.*"lie-live"/);
    assert.equal((await daemon.attachment('lie-live')).state, 'added');
    assert.deepEqual(delCalls(fx), ['DEL lie-gone eth0']);
  });

  it('a hint that is not percent-encoded text is refused with code 4', async () => {
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('lienet3', '1.0.0', [fixturePlugin(join(env.dir, 'fx3'))]),
    ]);
    const w = wire('DEL', 'lie-enc', conf);
    const res = await post(w, { ...w.hints, 'x-cni-network': '%E0%A4%A' });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.code, 4);
  });
});

describe('a DEL of an attachment already torn down', () => {
  it('is answered 200 at admission, without running the delegate again', async () => {
    const fx = join(env.dir, 'fx-tomb');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('tombnet', '1.0.0', [fixturePlugin(fx)])]);
    const add = wire('ADD', 'tomb-1', conf);
    assert.equal((await post(add, add.hints)).status, 200);
    const del = wire('DEL', 'tomb-1', conf);
    assert.equal((await post(del, del.hints)).status, 200);
    const early0 = (await admission()).delsAnsweredEarly;
    for (let i = 0; i < 5; i++) {
      const res = await post(del, del.hints);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.text, '');
    }
    assert.equal((await admission()).delsAnsweredEarly, early0 + 5);
    assert.deepEqual(delCalls(fx), ['DEL tomb-1 eth0']);
  });

  it('an ADD of the same container after it is not answered from the tombstone: the next DEL tears it down', async () => {
    const fx = join(env.dir, 'fx-tomb2');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('tombnet2', '1.0.0', [fixturePlugin(fx)])]);
    const add = wire('ADD', 'tomb-2', conf);
    const del = wire('DEL', 'tomb-2', conf);
    assert.equal((await post(add, add.hints)).status, 200);
    assert.equal((await post(del, del.hints)).status, 200);
    assert.equal((await post(add, add.hints)).status, 200);
    assert.equal((await post(del, del.hints)).status, 200);
    assert.deepEqual(delCalls(fx), ['DEL tomb-2 eth0', 'DEL tomb-2 eth0']);
  });
});

describe('an ADD while slow DELs fill the DEL admission cap', () => {
  it('is admitted and answered while DELs wait; every DEL is answered 200 and runs its delegate once', async () => {
    const fx = join(env.dir, 'fx-slow');
    const slow = stewardConf(daemon.socket, '1.0.0', [
      delegate('slownet', '1.0.0', [fixturePlugin(fx, { sleepDelMs: 8000 })]),
    ]);
    const { maxDels } = await admission();
    const n = maxDels + 4;
    const cids = Array.from({ length: n }, (_, i) => `slow-${i}`);
    for (const cid of cids) {
      const w = wire('ADD', cid, slow);
      assert.equal((await post(w, w.hints)).status, 200);
    }
    let delsAnswered = 0;
    const dels = cids.map((cid) => {
      const w = wire('DEL', cid, slow);
      return post(w, w.hints).then((r) => {
        delsAnswered++;
        return r;
      });
    });
    await daemon.waitFor('the DEL admission cap to fill', async () => {
      const a = await admission();
      return a.delsAdmitted === maxDels && a.delsWaiting === n - maxDels;
    });

    const fast = stewardConf(daemon.socket, '1.0.0', [
      delegate('fastnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-fast'))]),
    ]);
    const add = wire('ADD', 'fast-1', fast);
    const res = await post(add, add.hints);
    assert.equal(res.status, 200, res.text);
    assert.equal(delsAnswered, 0, 'the ADD was answered only after DELs that were still sleeping in their delegate');
    assert.ok((await admission()).delsWaiting > 0, 'DELs were still waiting for admission when the ADD was answered');

    for (const r of await Promise.all(dels)) assert.equal(r.status, 200, r.text);
    const calls = delCalls(fx);
    assert.equal(calls.length, n, calls.join('\n'));
    assert.equal(new Set(calls).size, n);
    assert.deepEqual(await admission().then((a) => [a.delsAdmitted, a.delsWaiting]), [0, 0]);
  });
});

describe('hints too long to send', () => {
  it('a 20 KB container id is left out of the hints (no 431), and the request is served', async () => {
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('longnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-long'))]),
    ]);
    const w = wire('DEL', 'x'.repeat(20_000), conf);
    assert.equal(w.hints['x-cni-containerid'], undefined);
    assert.equal(w.hints['x-cni-command'], 'DEL');
    const res = await post(w, w.hints);
    assert.notEqual(res.status, 431, res.text);
    assert.ok(res.json === undefined || res.json.code !== 104, res.text);
  });
});

describe('clients that send their headers and stall', () => {
  /** Opens `n` hinted DELs of this content type that send their headers (and `bodyStart` of the body) and stall. */
  function stallers(conf: Record<string, unknown>, tag: string, n: number, contentType: string, bodyStart = 0) {
    const held: Socket[] = [];
    const answers: string[] = [];
    for (let i = 0; i < n; i++) {
      const w = wire('DEL', `${tag}-${i}`, conf);
      const s = connect(daemon.socket);
      env.defer(() => {
        s.destroy();
      });
      s.on('data', (b) => answers.push(b.toString('utf8')));
      s.on('error', () => undefined);
      const head = Object.entries({ ...w.hints, 'content-type': contentType })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      s.write(
        `POST /v1/cni HTTP/1.1\r\nhost: l\r\ncontent-length: ${Buffer.byteLength(w.body)}\r\n${head}\r\n` +
          w.body.slice(0, bodyStart),
      );
      held.push(s);
    }
    return { held, answers };
  }

  for (const [what, n, contentType, bodyStart] of [
    ['two JSON DELs with no body (the DEL cap)', 2, 'application/json', 0],
    ['six JSON DELs with no body (more than the cap, parked)', 6, 'application/json', 0],
  ] as const) {
    it(`${what}: held for at most the body deadline from their headers; another pod's DEL is then served`, async () => {
      const tag = `stall${n}${bodyStart}`;
      const fx = join(env.dir, `fx-${tag}`);
      const conf = stewardConf(daemon.socket, '1.0.0', [delegate(`${tag}net`, '1.0.0', [fixturePlugin(fx)])]);
      const { held, answers } = stallers(conf, tag, n, contentType, bodyStart);
      await daemon.waitFor('the stalled DELs to be admitted or parked', async () => {
        const a = await admission();
        return a.delsAdmitted + a.delsWaiting === n;
      });
      const t0 = performance.now();
      const res = await post(wire('DEL', `${tag}-victim`, conf), wire('DEL', `${tag}-victim`, conf).hints);
      const ms = performance.now() - t0;
      assert.equal(res.status, 200, res.text);
      // However many stall: each one's deadline runs from its own headers, not from its admission.
      // The code's bound is one deadline plus the victim's own fixture DEL (a margin for a loaded
      // machine); six stalled DELs whose deadlines ran from admission would hold it 2-3 deadlines.
      assert.ok(ms < BODY_DEADLINE_MS + 4000, `the victim DEL waited ${Math.round(ms)} ms`);
      assert.deepEqual(delCalls(fx), [`DEL ${tag}-victim eth0`]);
      // The stalled ones were told to try again (11) and their connections closed.
      await daemon.waitFor('the stalled connections to close', () => held.every((s) => s.destroyed || s.readableEnded));
      assert.equal(answers.length, n, answers.join('\n'));
      for (const a of answers) assert.match(a, /"code":11,"msg":"request body not received within 5000 ms"/);
      const after = await admission();
      assert.equal(after.delsAdmitted + after.delsWaiting, 0);
    });
  }
});

describe('a hinted DEL of a type that is not JSON', () => {
  it('is answered at once, not held for a body it cannot take (fastify took text/plain, held it 5 s as a stalled DEL)', async () => {
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('plainnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-plain'))]),
    ]);
    const w = wire('DEL', 'plain-0', conf);
    const s = connect(daemon.socket);
    env.defer(() => {
      s.destroy();
    });
    const answer: string[] = [];
    s.on('data', (b) => answer.push(b.toString('utf8')));
    s.on('error', () => undefined);
    const head = Object.entries({ ...w.hints, 'content-type': 'text/plain' })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const t0 = performance.now();
    s.write(
      `POST /v1/cni HTTP/1.1\r\nhost: l\r\ncontent-length: ${Buffer.byteLength(w.body)}\r\n${head}\r\n${w.body.slice(0, 10)}`,
    );
    await daemon.waitFor('the answer', () => answer.join('').includes('"code"'));
    assert.ok(performance.now() - t0 < BODY_DEADLINE_MS, 'before any body deadline');
    assert.match(answer.join(''), /^HTTP\/1\.1 4\d\d /);
    assert.match(answer.join(''), /"code":6,/);
    assert.deepEqual(await admission().then((a) => [a.delsAdmitted, a.delsWaiting]), [0, 0]);
    assert.deepEqual(delCalls(join(env.dir, 'fx-plain')), []);
  });
});

describe('clients without hints (curl, an older shim) that send part of a body and stall', () => {
  /** Sends `path`'s headers and all but the last 10 bytes of `body`, with no hint headers; resolves with what came back once the connection closed. */
  function shortBody(path: string, body: string): Promise<{ answer: string; ms: number }> {
    const s = connect(daemon.socket);
    env.defer(() => {
      s.destroy();
    });
    const chunks: Buffer[] = [];
    const t0 = performance.now();
    s.on('data', (b) => chunks.push(b));
    s.on('error', () => undefined);
    s.write(
      `POST ${path} HTTP/1.1\r\nhost: l\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n` +
        body.slice(0, -10),
    );
    return new Promise((resolve) => {
      const done = () => resolve({ answer: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - t0 });
      s.once('close', done);
      // Still open well past the deadline: given up on here, and the assertions say so.
      setTimeout(() => s.destroy(), BODY_DEADLINE_MS + 8000).unref();
    });
  }

  it('POST /v1/cni is answered 11 at the body deadline and closed; any other route 408; their connections held no longer', async () => {
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('shortnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-short'))]),
    ]);
    const [cni, retry] = await Promise.all([
      shortBody('/v1/cni', wire('ADD', 'short-1', conf).body),
      shortBody('/v1/teardowns/retry', '{"containerId":"short-2"}'),
    ]);
    // Held before for as long as the client kept it open (minutes), however many of them.
    for (const r of [cni, retry]) assert.ok(r.ms < BODY_DEADLINE_MS + 3000, `closed after ${Math.round(r.ms)} ms`);
    assert.ok(cni.ms >= BODY_DEADLINE_MS - 100, `closed after ${Math.round(cni.ms)} ms, before the deadline`);
    assert.match(cni.answer, /^HTTP\/1\.1 503 /);
    assert.match(cni.answer, /"code":11,"msg":"request body not received within 5000 ms"/);
    assert.match(retry.answer, /^HTTP\/1\.1 408 /);
    assert.match(retry.answer, /\{"error":"request body not received within 5000 ms"\}/);
    assert.deepEqual(await daemon.get('/v1/attachments?containerId=short-1').then((r) => r.json), []);
  });
});

/** Sends a hinted request on a raw connection; the returned function closes it (a shim killed by its runtime). */
function sendAndLeave(w: { body: string; hints: Record<string, string> }): () => void {
  const s = connect(daemon.socket);
  env.defer(() => {
    s.destroy();
  });
  s.on('error', () => undefined);
  const head = Object.entries({ ...w.hints, 'content-type': 'application/json' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  s.write(`POST /v1/cni HTTP/1.1\r\nhost: l\r\ncontent-length: ${Buffer.byteLength(w.body)}\r\n${head}\r\n${w.body}`);
  return () => s.destroy();
}

describe('a runtime that gave up on slow ADDs', () => {
  it("its DELs of those sandboxes wait behind the ADDs, not in DEL slots: another pod's DEL is served at once", async () => {
    const fx = join(env.dir, 'fx-gaveup');
    // Far longer than serving another pod's DEL takes, even on a loaded machine.
    const addSleepMs = 8000;
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('gaveupnet', '1.0.0', [fixturePlugin(fx, { sleepAddMs: addSleepMs })]),
    ]);
    const leave = ['gaveup-x', 'gaveup-y'].map((id) => sendAndLeave(wire('ADD', id, conf)));
    // The runtime leaves only once both ADDs run: an ADD whose requester left before it started is
    // never run (add.ts), and this test is about ADDs still running for nobody.
    await daemon.waitFor('both ADDs to run', () => fixtureCalls(fx, 'ADD').length === 2);
    for (const l of leave) l();
    await daemon.waitFor('the runtime to have left', async () => (await admission()).othersInFlight === 0);
    // The runtime's DELs of the two sandboxes (2 = the DEL cap): they wait for the ADDs in the engine.
    const dels = ['gaveup-x', 'gaveup-y'].map((id) => post(wire('DEL', id, conf), wire('DEL', id, conf).hints));
    const t0 = performance.now();
    const other = await post(wire('DEL', 'gaveup-other', conf), wire('DEL', 'gaveup-other', conf).hints);
    const ms = performance.now() - t0;
    assert.equal(other.status, 200, other.text);
    // The decision: it was answered while both abandoned ADDs still ran (no rollback DEL of theirs yet).
    assert.ok(
      fixtureCalls(fx, 'ADD').length === 2 && !fixtureCalls(fx, 'DEL').some((l) => / gaveup-[xy] /.test(l)),
      "another pod's DEL was answered only after an abandoned ADD ended",
    );
    // Behind them it would have waited out most of their sleep (begun just before t0).
    assert.ok(ms < addSleepMs - 2000, `another pod's DEL waited ${Math.round(ms)} ms behind the abandoned ADDs`);
    for (const r of await Promise.all(dels)) assert.equal(r.status, 200, r.text);
    // Each abandoned ADD was undone once (its requester left) and the runtime's DEL found it gone.
    for (const id of ['gaveup-x', 'gaveup-y']) {
      assert.equal((await daemon.attachment(id)).state, 'deleted');
      assert.deepEqual(
        delCalls(fx).filter((l) => l === `DEL ${id} eth0`),
        [`DEL ${id} eth0`],
      );
    }
  });
});

describe('a runtime retrying the DEL of a pod whose delegate hangs', () => {
  it("its retries join that DEL without taking the DEL slots: another pod's DEL is served at once", async () => {
    const fx = join(env.dir, 'fx-retry');
    const hold = join(env.dir, 'retry-hold');
    writeFileSync(hold, '');
    const stuck = stewardConf(daemon.socket, '1.0.0', [
      delegate('retrynet', '1.0.0', [fixturePlugin(fx, { holdDelWhileFile: hold })]),
    ]);
    const add = wire('ADD', 'retry-a', stuck);
    assert.equal((await post(add, add.hints)).status, 200);
    const { maxDels } = await admission();
    // As many DELs of the one pod as there are DEL slots (the kubelet retrying StopPodSandbox).
    const dels = Array.from({ length: maxDels }, () =>
      post(wire('DEL', 'retry-a', stuck), wire('DEL', 'retry-a', stuck).hints),
    );
    await daemon.waitFor('its delegate DEL to hang', () => fixtureCalls(fx, 'DEL').length === 1);
    await daemon.waitFor('every retry admitted', async () => (await admission()).delsAdmitted === maxDels);
    const other = stewardConf(daemon.socket, '1.0.0', [
      delegate('retryother', '1.0.0', [fixturePlugin(join(env.dir, 'fx-retry-other'))]),
    ]);
    const res = await post(wire('DEL', 'retry-b', other), wire('DEL', 'retry-b', other).hints);
    assert.equal(res.status, 200, res.text);
    assert.ok(
      existsSync(hold) && fixtureCalls(fx, 'DELDONE').length === 0,
      "another pod's DEL waited for the hung one",
    );
    rmSync(hold);
    for (const r of await Promise.all(dels)) assert.equal(r.status, 200, r.text);
    assert.deepEqual(delCalls(fx), ['DEL retry-a eth0'], 'one delegate DEL for all of them');
    assert.deepEqual(await admission().then((a) => [a.delsAdmitted, a.delsWaiting]), [0, 0]);
  });
});

describe('requests without hint headers (an older shim, curl)', () => {
  it('ADD, DEL and a repeated DEL are served as before', async () => {
    const fx = join(env.dir, 'fx-old');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('oldnet', '1.0.0', [fixturePlugin(fx)])]);
    const early0 = (await admission()).delsAnsweredEarly;
    const add = wire('ADD', 'old-1', conf);
    const r1 = await post(add, {});
    assert.equal(r1.status, 200, r1.text);
    assert.equal(r1.json.cniVersion, '1.0.0');
    const del = wire('DEL', 'old-1', conf);
    for (let i = 0; i < 3; i++) assert.equal((await post(del, {})).status, 200);
    assert.deepEqual(delCalls(fx), ['DEL old-1 eth0']);
    assert.equal((await admission()).delsAnsweredEarly, early0, 'no hints, no admission path');
  });
});
