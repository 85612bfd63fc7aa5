// The admission path (daemon/src/routes/admission.ts) attacked the way a hostile or buggy local
// client would, against a real stewardd over its real Unix socket, with raw bytes: bodies that are
// empty, not JSON, of the wrong shape or over the limit, chunked, dribbled, aborted, pipelined, sent
// with odd content types or duplicated hints. Each hinted answer (served from the raw body) is
// compared with what the same request without hints gets through fastify, and after every attack
// /v1/status shows no leaked admission counter.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { CNI_ROUTE } from '@cni-steward/shared';
import { Daemon } from '../helpers/daemon.js';
import { postUnix } from '../helpers/unix-post.js';
import { TestEnv, SYSTEM_CNI_BIN } from '../helpers/env.js';
import { delegate, fixturePlugin, hintedWire, stewardConf } from '../helpers/netconf.js';

const env = new TestEnv('attack');
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

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: any;
}

/** The head of one HTTP/1.1 POST /v1/cni request; `headers` are written as given (duplicates allowed). */
function head(headers: Array<[string, string]>, path = '/v1/cni'): string {
  return `POST ${path} HTTP/1.1\r\nHost: localhost\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}

/** Parses every complete response (content-length framed) at the start of `buf`. */
function parseAnswers(buf: Buffer): Answer[] {
  const out: Answer[] = [];
  let rest = buf;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const lines = rest.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number((lines[0] ?? '').split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    if (status === 100) {
      rest = rest.subarray(end + 4);
      continue;
    }
    const len = Number(headers['content-length'] ?? 0);
    if (rest.length < end + 4 + len) return out;
    const text = rest.subarray(end + 4, end + 4 + len).toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    out.push({ status, headers, text, json });
    rest = rest.subarray(end + 4 + len);
  }
}

/** A raw connection to the daemon's socket: write bytes as you like, read whole answers. */
class Raw {
  readonly sock: Socket;
  private buf = Buffer.alloc(0);
  closed = false;
  error: Error | undefined;
  private readonly ready: Promise<void>;
  constructor() {
    this.sock = connect(daemon.socket);
    this.ready = new Promise((r) => this.sock.once('connect', () => r()));
    this.sock.on('data', (b: Buffer) => (this.buf = Buffer.concat([this.buf, b])));
    this.sock.on('error', (e) => (this.error = e));
    this.sock.on('close', () => (this.closed = true));
  }
  async write(data: string | Buffer): Promise<void> {
    await this.ready;
    await new Promise<void>((resolve) => {
      if (this.sock.destroyed) return resolve();
      this.sock.write(data, () => resolve());
    });
  }
  get answers(): Answer[] {
    return parseAnswers(this.buf);
  }
  /** Waits for `n` whole answers (or the connection's close) and returns what came. */
  async read(n: number, timeoutMs = 60_000): Promise<Answer[]> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && this.answers.length < n && !this.closed) await sleep(20);
    return this.answers;
  }
  destroy(): void {
    this.sock.destroy();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One request over a fresh connection: its head and body as written, the answer read. */
async function once(headers: Array<[string, string]>, body: string | Buffer): Promise<Answer> {
  const c = new Raw();
  await c.write(Buffer.concat([Buffer.from(head(headers)), Buffer.from(body)]));
  const [a] = await c.read(1);
  c.destroy();
  assert.ok(a, `no answer (connection closed: ${c.closed}, error: ${c.error?.message ?? 'none'})`);
  return a;
}

const hintList = (h: Record<string, string>): Array<[string, string]> => Object.entries(h);
const withLength = (body: string | Buffer, ct = 'application/json'): Array<[string, string]> => [
  ['Content-Type', ct],
  ['Content-Length', String(Buffer.byteLength(body))],
];

async function admission(): Promise<any> {
  return (await daemon.status()).admission;
}

/** Every admission counter back at rest, and ADD priority off once its second has passed. */
async function assertAtRest(): Promise<void> {
  await daemon.waitFor(
    'admission counters at rest',
    async () => {
      const a = await admission();
      return a.othersInFlight === 0 && a.delsAdmitted === 0 && a.delsWaiting === 0;
    },
    30_000,
  );
  await daemon.waitFor('addPriority off', async () => (await admission()).addPriority === false, 30_000);
}

function conf(name: string, behaviour: Record<string, unknown> = {}) {
  return stewardConf(daemon.socket, '1.0.0', [
    delegate(name, '1.0.0', [fixturePlugin(join(env.dir, `fx-${name}`), behaviour)]),
  ]);
}

/** The same body with and without hints: status and CNI code must agree. */
async function compare(
  what: string,
  body: string | Buffer,
  hints: Record<string, string>,
  ct = 'application/json',
): Promise<{ hinted: Answer; plain: Answer }> {
  const hinted = await once([...withLength(body, ct), ...hintList(hints)], body);
  const plain = await once(withLength(body, ct), body);
  assert.equal(hinted.status, plain.status, `${what}: status, hinted ${hinted.text} vs plain ${plain.text}`);
  assert.equal(hinted.json?.code, plain.json?.code, `${what}: code, hinted ${hinted.text} vs plain ${plain.text}`);
  return { hinted, plain };
}

describe('bodies a buggy client sends, hinted vs not', () => {
  it('empty, invalid JSON, JSON of the wrong shape: the same status and CNI code either way', async () => {
    const w = wire('ADD', 'shape-1', conf('shapenet'));
    for (const [what, body] of [
      ['empty', ''],
      ['invalid JSON', '{"env":'],
      ['null', 'null'],
      ['a number', '42'],
      ['an array', '[]'],
      ['no env', '{"config":{}}'],
      ['a byte-order mark', `\uFEFF${w.body}`],
    ] as const) {
      const { hinted } = await compare(what, body, w.hints);
      if (what !== 'a byte-order mark') assert.notEqual(hinted.status, 200, `${what}: ${hinted.text}`);
    }
    await assertAtRest();
  });

  it('content types: charset, upper case, text/plain and a json look-alike answer as fastify does', async () => {
    const c = conf('ctnet');
    let i = 0;
    for (const ct of [
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'Application/Json ; charset=UTF-8',
      'text/plain',
      'application/json-seq',
      'application/jsonx',
    ]) {
      const w = wire('ADD', `ct-${i++}`, c);
      await compare(ct, w.body, w.hints, ct);
      const d = wire('DEL', `ct-${i - 1}`, c);
      await compare(`DEL ${ct}`, d.body, d.hints, ct);
    }
    await assertAtRest();
  });

  it('over the body limit: code 7 either way, the daemon stays healthy and at rest', async () => {
    const w = wire('ADD', 'big-1', conf('bignet'));
    const big = JSON.stringify({ ...JSON.parse(w.body), pad: 'x'.repeat(2 * 1024 * 1024) });
    // Hinted: refused at once, the rest read and dropped, so a client still writing gets the answer.
    const hinted = await once([...withLength(big), ...hintList(w.hints)], big);
    assert.equal(hinted.status, 400, hinted.text);
    assert.equal(hinted.json?.code, 7, hinted.text);
    // Without hints fastify answers with Connection: close and may close while the client still
    // writes (EPIPE, no answer): when an answer does arrive, it is the same.
    const plain = await once([...withLength(big)], big).catch(() => undefined);
    if (plain) assert.deepEqual([plain.status, plain.json?.code], [400, 7], plain.text);
    assert.equal((await daemon.get('/healthz')).status, 200);
    await assertAtRest();
  });

  it("over the body limit from the shim's own client (Connection: close): code 7 hinted, the daemon healthy and at rest", async () => {
    const w = wire('DEL', 'bigshim-1', conf('bigshimnet'));
    const big = JSON.stringify({ ...JSON.parse(w.body), pad: 'x'.repeat(2 * 1024 * 1024) });
    // Hinted: answered once the whole body is in, so the shim, still writing, does not get EPIPE
    // (it would report the daemon unreachable, and spool a DEL).
    for (let i = 0; i < 3; i++) {
      const reply = await postUnix(daemon.socket, CNI_ROUTE, big, 60_000, w.hints);
      assert.equal(reply.status, 400, reply.body);
      assert.equal(JSON.parse(reply.body).code, 7, reply.body);
    }
    // Without hints fastify answers at once with Connection: close and may close while the shim still
    // writes (EPIPE): not asserted, only that the daemon is unharmed.
    await postUnix(daemon.socket, CNI_ROUTE, big, 60_000, {}).catch(() => undefined);
    assert.equal((await daemon.get('/healthz')).status, 200);
    await assertAtRest();
  });

  it('over the body limit sent chunked (no content-length): code 7, at rest', async () => {
    const w = wire('ADD', 'bigc-1', conf('bigcnet'));
    const chunk = 'x'.repeat(64 * 1024);
    // Only the hinted request is asserted: fastify (no hints) closes the connection with the body
    // half sent, and this client, still writing, gets EPIPE instead of the answer.
    for (const hints of [w.hints]) {
      const c = new Raw();
      await c.write(head([['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked'], ...hintList(hints)]));
      for (let k = 0; k < 40 && !c.closed && c.answers.length === 0; k++) {
        await c.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      }
      const [a] = await c.read(1);
      c.destroy();
      assert.ok(a, `no answer (connection closed: ${c.closed}, error: ${c.error?.message ?? 'none'})`);
      assert.equal(a.json?.code, 7, a.text);
    }
    await assertAtRest();
  });
});

describe('how the body arrives', () => {
  it('chunked and byte by byte: served 200 like a plain body', async () => {
    const c = conf('slownet');
    const w = wire('ADD', 'dribble-1', c);
    const r = new Raw();
    await r.write(head([['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked'], ...hintList(w.hints)]));
    const bytes = Buffer.from(w.body);
    for (let k = 0; k < bytes.length; k += 7) {
      const part = bytes.subarray(k, k + 7);
      await r.write(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
      if (k < 70) await sleep(5);
    }
    await r.write('0\r\n\r\n');
    const [a] = await r.read(1);
    r.destroy();
    assert.equal(a?.status, 200, a?.text);

    const d = wire('DEL', 'dribble-1', c);
    const r2 = new Raw();
    await r2.write(head([...withLength(d.body), ...hintList(d.hints)]));
    for (const b of Buffer.from(d.body)) await r2.write(Buffer.from([b]));
    const [a2] = await r2.read(1);
    r2.destroy();
    assert.equal(a2?.status, 200, a2?.text);
    await assertAtRest();
  });

  it('Expect: 100-continue: the body is asked for and served', async () => {
    const w = wire('ADD', 'expect-1', conf('expnet'));
    const r = new Raw();
    await r.write(head([...withLength(w.body), ['Expect', '100-continue'], ...hintList(w.hints)]));
    await r.write(w.body);
    const [a] = await r.read(1);
    r.destroy();
    assert.equal(a?.status, 200, a?.text);
    await assertAtRest();
  });

  it('aborted mid-body (ADD and DEL): no counter leaks', async () => {
    const c = conf('abortnet');
    for (const cmd of ['ADD', 'DEL']) {
      const w = wire(cmd, `abort-${cmd}`, c);
      const r = new Raw();
      await r.write(head([...withLength(w.body), ...hintList(w.hints)]));
      await r.write(w.body.slice(0, 20));
      await sleep(200);
      r.destroy();
    }
    await assertAtRest();
  });

  it('keep-alive: two requests one after the other on one connection', async () => {
    const c = conf('kanet');
    const add = wire('ADD', 'ka-1', c);
    const del = wire('DEL', 'ka-1', c);
    const r = new Raw();
    await r.write(head([...withLength(add.body), ...hintList(add.hints)]) + add.body);
    assert.equal((await r.read(1))[0]?.status, 200);
    await r.write(head([...withLength(del.body), ...hintList(del.hints)]) + del.body);
    const answers = await r.read(2);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200],
    );
    r.destroy();
    await assertAtRest();
  });

  it('pipelined: ADD, DEL, DEL written back to back are answered in order', async () => {
    const c = conf('pipenet');
    const add = wire('ADD', 'pipe-1', c);
    const del = wire('DEL', 'pipe-1', c);
    const one = (w: { body: string; hints: Record<string, string> }) =>
      head([...withLength(w.body), ...hintList(w.hints)]) + w.body;
    const r = new Raw();
    await r.write(one(add) + one(del) + one(del));
    const answers = await r.read(3);
    r.destroy();
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200],
      answers.map((a) => a.text).join('\n'),
    );
    await assertAtRest();
  });

  it('pipelined: an ADD queued behind a slow ADD on the same connection is served, not taken for abandoned', async () => {
    // node:http gives a pipelined response its socket only when the one ahead is done: the ADD
    // behind must still count as waited for (routes/client-gone.ts reads the request's socket).
    const c = conf('pipeadd', { sleepAddMs: 500 });
    const one = (w: { body: string; hints: Record<string, string> }) =>
      head([...withLength(w.body), ...hintList(w.hints)]) + w.body;
    const r = new Raw();
    await r.write(one(wire('ADD', 'pipeadd-1', c)) + one(wire('ADD', 'pipeadd-2', c)));
    const answers = await r.read(2);
    r.destroy();
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200],
      answers.map((a) => a.text).join('\n'),
    );
    for (const id of ['pipeadd-1', 'pipeadd-2']) assert.equal((await daemon.attachment(id)).state, 'added');
  });

  it('40 pipelined requests (ADD, then DELs torn down and not, a refused one among them): answered in order', async () => {
    const c = conf('pipe40');
    const one = (w: { body: string; hints: Record<string, string> }, hints = w.hints) =>
      head([...withLength(w.body), ...hintList(hints)]) + w.body;
    const add = wire('ADD', 'pipe40-a', c);
    const del = wire('DEL', 'pipe40-a', c);
    const other = wire('DEL', 'pipe40-b', c);
    let out = one(add);
    const expected = [200];
    for (let i = 0; i < 39; i++) {
      if (i === 20) {
        out += one(other, del.hints); // hints naming another container: refused with code 4
        expected.push(400);
      } else {
        out += one(i % 3 === 2 ? other : del);
        expected.push(200);
      }
    }
    const r = new Raw();
    await r.write(out);
    const answers = await r.read(40);
    r.destroy();
    assert.deepEqual(
      answers.map((a) => a.status),
      expected,
    );
    assert.equal(answers[21]?.json?.code, 4, answers[21]?.text);
    await assertAtRest();
  });

  it('pipelined behind a slow ADD, then the client goes away: no counter leaks', async () => {
    const c = conf('pipeslow', { sleepAddMs: 3000 });
    const add = wire('ADD', 'pipes-1', c);
    const add2 = wire('ADD', 'pipes-2', c);
    const del = wire('DEL', 'pipes-3', c);
    const one = (w: { body: string; hints: Record<string, string> }) =>
      head([...withLength(w.body), ...hintList(w.hints)]) + w.body;
    const r = new Raw();
    await r.write(one(add) + one(add2) + one(del));
    await sleep(500);
    r.destroy();
    await assertAtRest();
  });
});

describe('hints', () => {
  it('a query string (?x=1&x=2) is answered as fastify answers it, hinted or not', async () => {
    const w = wire('ADD', 'query-1', conf('querynet'));
    for (const path of ['/v1/cni?x=1&x=2', '/v1/cni?']) {
      const ask = async (hints: Record<string, string>) => {
        const c = new Raw();
        await c.write(head([...withLength(w.body), ...hintList(hints)], path) + w.body);
        const [a] = await c.read(1);
        c.destroy();
        return a;
      };
      const [h, p] = [await ask(w.hints), await ask({})];
      assert.deepEqual([h?.status, h?.json?.code], [p?.status, p?.json?.code], `${path}: ${h?.text} vs ${p?.text}`);
    }
    await assertAtRest();
  });

  it('duplicated hint headers are refused with code 4, as without hints they are served', async () => {
    const w = wire('ADD', 'dup-1', conf('dupnet'));
    const a = await once([...withLength(w.body), ...hintList(w.hints), ['X-CNI-Command', 'ADD']], w.body);
    assert.equal(a.status, 400, a.text);
    assert.equal(a.json?.code, 4, a.text);
    // Refused as given twice: node joins a repeated x- header ("ADD, ADD"), which read as one value
    // was refused as disagreeing with the body.
    assert.match(String(a.json?.msg), /request header x-cni-command is given 2 times/, a.text);
    await assertAtRest();
  });
});

/** One hinted request over its own connection (as the shim sends it); resolves with the answer and when it came. */
async function hinted(w: { body: string; hints: Record<string, string> }): Promise<Answer & { at: number }> {
  const a = await once([...withLength(w.body), ...hintList(w.hints)], w.body);
  return { ...a, at: Date.now() };
}

describe('racing and storms', () => {
  it('a hinted ADD and DEL of the same container racing: both 200, and the container ends torn down or added, never half', async () => {
    const c = conf('racenet');
    for (let i = 0; i < 5; i++) {
      const add = wire('ADD', `race-${i}`, c);
      const del = wire('DEL', `race-${i}`, c);
      const [a, d] = await Promise.all([hinted(add), hinted(del)]);
      assert.equal(a.status, 200, a.text);
      assert.equal(d.status, 200, d.text);
      const state = (await daemon.attachment(`race-${i}`))?.state;
      assert.ok(state === undefined || state === 'added' || state === 'deleted', String(state));
      // Whatever the order was, a DEL after it leaves nothing.
      assert.equal((await hinted(del)).status, 200);
      const after = (await daemon.attachment(`race-${i}`))?.state;
      assert.ok(after === undefined || after === 'deleted', String(after));
    }
    await assertAtRest();
  });

  it('a DEL storm while an ADD hangs in a slow plugin: every DEL answered 200, torn-down ones before the ADD', async () => {
    const fast = conf('stormfast');
    const tombs = Array.from({ length: 4 }, (_, i) => `storm-t${i}`);
    for (const cid of tombs) {
      assert.equal((await hinted(wire('ADD', cid, fast))).status, 200);
      assert.equal((await hinted(wire('DEL', cid, fast))).status, 200);
    }
    const lives = Array.from({ length: 3 }, (_, i) => `storm-l${i}`);
    for (const cid of lives) assert.equal((await hinted(wire('ADD', cid, fast))).status, 200);

    const slow = conf('stormslow', { sleepAddMs: 12_000 });
    const started = Date.now();
    const add = hinted(wire('ADD', 'storm-hang', slow));
    await daemon.waitFor('the slow ADD in flight', async () => (await admission()).othersInFlight === 1);
    // The storm: torn-down DELs repeated, DELs with a teardown to do, and one DEL of the hanging ADD's container.
    const sameDel = hinted(wire('DEL', 'storm-hang', slow));
    const tombDels = Array.from({ length: 60 }, (_, i) => hinted(wire('DEL', tombs[i % tombs.length] as string, fast)));
    const liveDels = lives.map((cid) => hinted(wire('DEL', cid, fast)));
    const tombAnswers = await Promise.all(tombDels);
    const liveAnswers = await Promise.all(liveDels);
    const a = await add;
    assert.equal(a.status, 200, a.text);
    for (const r of [...tombAnswers, ...liveAnswers]) assert.equal(r.status, 200, r.text);
    const s = await sameDel;
    assert.equal(s.status, 200, s.text);
    // Torn-down and other containers' DELs do not wait for a plugin of another container.
    const lastOther = Math.max(...tombAnswers.map((r) => r.at), ...liveAnswers.map((r) => r.at));
    assert.ok(
      lastOther < a.at,
      `the storm's DELs were answered ${lastOther - started} ms in, the slow ADD ${a.at - started} ms in`,
    );
    await assertAtRest();
  });

  it('a DEL waiting for admission whose client goes away leaves the queue at once', async () => {
    const slowDel = conf('parknet', { sleepDelMs: 12_000 });
    const { maxDels } = await admission();
    const cids = Array.from({ length: maxDels }, (_, i) => `park-${i}`);
    for (const cid of cids) assert.equal((await hinted(wire('ADD', cid, slowDel))).status, 200);
    const busy = cids.map((cid) => hinted(wire('DEL', cid, slowDel)));
    await daemon.waitFor('the DEL cap full', async () => (await admission()).delsAdmitted === maxDels);
    const w = wire('DEL', 'park-gone', slowDel);
    const r = new Raw();
    await r.write(head([...withLength(w.body), ...hintList(w.hints)]) + w.body);
    await daemon.waitFor('the DEL parked', async () => (await admission()).delsWaiting === 1);
    r.destroy();
    await daemon.waitFor('the parked DEL dropped', async () => (await admission()).delsWaiting === 0, 5000);
    assert.equal((await admission()).delsAdmitted, maxDels, 'the slow DELs were still running');
    for (const b of await Promise.all(busy)) assert.equal(b.status, 200, b.text);
    await assertAtRest();
  });
});

describe('SIGTERM while DELs wait for admission', () => {
  /** A second daemon with slow DELs filling the cap and three more waiting, then SIGTERM; what each client got. */
  async function termWithParked(grace: string): Promise<{ answers: string[]; exitedMs: number }> {
    const d = new Daemon(env, {
      name: `term-${grace}`,
      args: ['--uninstall-on-delete', 'never', '--shutdown-grace', grace],
    });
    await d.start();
    const mk = (name: string, b: Record<string, unknown> = {}) =>
      stewardConf(d.socket, '1.0.0', [
        delegate(name, '1.0.0', [fixturePlugin(join(env.dir, `fx-${grace}-${name}`), b)]),
      ]);
    const slow = mk('slow', { sleepDelMs: 6000 });
    const fast = mk('fast');
    const send = (cmd: string, cid: string, c: Record<string, unknown>) => {
      const w = wire(cmd, cid, c);
      return postUnix(d.socket, CNI_ROUTE, w.body, 60_000, w.hints).then(
        (r) => `${cid} ${r.status} ${r.status === 200 ? '' : String(JSON.parse(r.body).code)}`.trim(),
        (e: Error) => `${cid} unreachable: ${e.message}`,
      );
    };
    for (const cid of ['s1', 's2', 's3']) assert.match(await send('ADD', cid, slow), /200/);
    assert.match(await send('ADD', 'f1', fast), /200/);
    const dels = [send('DEL', 's1', slow), send('DEL', 's2', slow)];
    await d.waitFor('the DEL cap full', async () => (await d.status()).admission.delsAdmitted === 2);
    dels.push(send('DEL', 's3', slow), send('DEL', 'f1', fast));
    await d.waitFor('two DELs waiting', async () => (await d.status()).admission.delsWaiting === 2);
    const t0 = Date.now();
    const exited = new Promise<number>((r) => d.proc!.once('exit', () => r(Date.now() - t0)));
    d.proc!.kill('SIGTERM');
    return { answers: await Promise.all(dels), exitedMs: await exited };
  }

  it('within the grace every admitted and waiting DEL is answered 200 before the daemon exits', async () => {
    const { answers } = await termWithParked('40');
    assert.deepEqual(answers, ['s1 200', 's2 200', 's3 200', 'f1 200']);
  });

  it('past the grace the daemon exits and every DEL still open sees its connection closed (the shim spools it), never a CNI error', async () => {
    const { answers, exitedMs } = await termWithParked('1');
    for (const a of answers) assert.match(a, /unreachable: connection closed before a complete HTTP response/);
    assert.ok(exitedMs >= 900, `exited ${exitedMs} ms after SIGTERM`);
  });
});
