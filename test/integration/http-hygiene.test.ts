// HTTP hygiene of the daemon's API, against a real stewardd process: repeated query parameters are
// a 400 with a message (never a 500), a netconf with "__proto__"/"constructor" keys is plain JSON,
// error texts echoed back are capped, relative CNI_PATH entries are ignored with a warning.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { openDatabase } from '../helpers/sqlite.js';
import { Daemon, startDaemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, hintedWire, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { MAX_IN_FLIGHT_PER_CONNECTION } from '../../daemon/src/server.js';

const env = new TestEnv('http');
const daemon = new Daemon(env);
before(() => daemon.start());
after(() => env.close());

describe('repeated query parameters', () => {
  for (const q of [
    'containerId=a&containerId=b',
    'state=added&state=deleted',
    'limit=1&limit=2',
    'containerId=a&state=added&state=added',
  ]) {
    it(`GET /v1/attachments?${q} is 400 with a message`, async () => {
      const res = await daemon.get(`/v1/attachments?${q}`);
      assert.equal(res.status, 400, res.text);
      assert.match(
        res.json.error,
        /query parameter "(containerId|state|limit)" is given 2 times; give it at most once/,
      );
    });
  }

  it('a 404 for a 10 KB URL echoes at most 256 bytes of it', async () => {
    const res = await daemon.get(`/no-such-route/${'u'.repeat(10_000)}`);
    assert.equal(res.status, 404);
    assert.ok(res.text.length < 400, `${res.text.length} bytes`);
    assert.match(res.json.error, /\[cut \d+ bytes\]$/);
  });

  it('limit takes decimal digits only: "0x10", "1e3", " 5", "5 ", "" and "+5" are 400; "007" is 7', async () => {
    for (const bad of ['0x10', '1e3', '%205', '5%20', '', '%2B5', '0', '100001']) {
      const res = await daemon.get(`/v1/attachments?limit=${bad}`);
      assert.equal(res.status, 400, `limit=${bad}: ${res.text}`);
      assert.equal(res.json.error, 'limit must be an integer from 1 to 100000');
    }
    const res = await daemon.get('/v1/attachments?limit=007');
    assert.equal(res.status, 200, res.text);
  });

  it('single parameters still work', async () => {
    const res = await daemon.get('/v1/attachments?containerId=a&state=added&limit=5');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, []);
  });
});

describe('a netconf with "__proto__" and "constructor" keys', () => {
  it('is accepted as plain JSON and stored as given, the keys reaching the delegate too', async () => {
    const dataDir = join(env.dir, 'ipam-proto');
    const fx = join(env.dir, 'fx-proto');
    const netns = env.netns();
    const bridge = { ...bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }) };
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('protonet', '1.0.0', [bridge, fixturePlugin(fx)])]);
    // JSON text, so the keys are own properties exactly as a runtime would send them.
    const text = JSON.stringify(conf)
      .replace(/^\{/, '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},')
      .replace('"type":"steward-fixture"', '"type":"steward-fixture","__proto__":{"x":1}');
    const add = await shim({ command: 'ADD', containerId: 'proto', netns }, text);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(fixtureCalls(fx, 'ADD').length, 1);
    const db = openDatabase(join(daemon.stateDir, 'steward.db'), { readonly: true });
    try {
      const row = db.prepare(`SELECT config FROM attachments WHERE container_id = 'proto'`).get() as { config: string };
      assert.match(row.config, /"__proto__":\{"polluted":true\}/);
      assert.match(row.config, /"constructor":\{"prototype":\{"polluted":true\}\}/);
    } finally {
      db.close();
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const del = await shim({ command: 'DEL', containerId: 'proto', netns }, text);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(leases(dataDir, 'protonet'), []);
  });
});

// The shim's requests carry hint headers and are parsed by routes/raw-cni.ts from the raw body; a
// request without them goes through fastify's JSON parser. Both must treat "__proto__",
// "constructor" and "prototype" keys as plain data, so each case runs on both paths.
describe('"__proto__" / "constructor" payloads on both request paths', () => {
  const paths = [
    { name: 'hinted, as the shim sends it (routes/raw-cni.ts)', hinted: true },
    { name: "without hints (fastify's JSON parser)", hinted: false },
  ];
  const post = (
    command: string,
    containerId: string,
    netns: string,
    conf: Record<string, unknown>,
    hinted: boolean,
  ) => {
    const { body, hints } = hintedWire(command, containerId, netns, conf);
    return { body, send: (text = body) => daemon.request('POST', '/v1/cni', text, hinted ? hints : {}) };
  };
  // Own "__proto__" keys, written as JSON text the way a runtime would send them.
  const poison = (text: string) =>
    text.replace(
      /"delegates":\[/,
      '"__proto__":{"ifname":"polluted0","polluted":true},"constructor":{"prototype":{"ifname":"polluted1"}},"delegates":[',
    );

  for (const p of paths) {
    it(`[${p.name}] the keys are stored as data and no prototype in the daemon is touched`, async () => {
      const fx = join(env.dir, `fx-poison-${p.hinted}`);
      const netns = env.netns();
      const conf = stewardConf(daemon.socket, '1.0.0', [
        delegate(`poison${p.hinted ? 'h' : 'p'}`, '1.0.0', [fixturePlugin(fx)]),
      ]);
      const cid = `poison-${p.hinted}`;
      const { body, send } = post('ADD', cid, netns, conf, p.hinted);
      const add = await send(poison(body));
      assert.equal(add.status, 200, add.text);
      const stored = await daemon.attachment(cid);
      assert.ok(stored, 'the attachment is journalled');
      // Afterwards a request whose second delegate names no ifname still gets net1: had
      // Object.prototype.ifname been set in the daemon, the delegate would inherit "polluted0".
      const fx2 = join(env.dir, `fx-clean-${p.hinted}`);
      const clean = stewardConf(daemon.socket, '1.0.0', [
        delegate(`first${p.hinted ? 'h' : 'p'}`, '1.0.0', [fixturePlugin(fx2)]),
        delegate(`second${p.hinted ? 'h' : 'p'}`, '1.0.0', [fixturePlugin(fx2)]),
      ]);
      const ok = await post('ADD', `clean-${p.hinted}`, env.netns(), clean, p.hinted).send();
      assert.equal(ok.status, 200, ok.text);
      const ifnames = fixtureCalls(fx2, 'ADD').map((l) => l.split(' ')[2]);
      assert.deepEqual(ifnames, ['eth0', 'net1']);
      for (const [c, n] of [
        [cid, netns],
        [`clean-${p.hinted}`, ''],
      ] as const) {
        const del = await post('DEL', c, n, c === cid ? conf : clean, p.hinted).send();
        assert.equal(del.status, 200, del.text);
      }
    });

    it(`[${p.name}] a value reachable only through "__proto__" counts as missing: the same CNI error as without the key`, async () => {
      const conf = stewardConf(daemon.socket, '1.0.0', [
        delegate('protomissing', '1.0.0', [fixturePlugin(join(env.dir, 'fx-miss'))]),
      ]);
      const { delegates, ...noDelegates } = conf as Record<string, unknown>;
      const withProto = JSON.stringify(noDelegates).replace(
        /^\{/,
        `{"__proto__":{"delegates":${JSON.stringify(delegates)}},`,
      );
      const { body, send } = post('ADD', 'protomissing', env.netns(), noDelegates, p.hinted);
      const plain = await send();
      const poisoned = await send(body.replace(JSON.stringify(noDelegates), withProto));
      assert.equal(plain.status, 400, plain.text);
      assert.equal(plain.json.code, 7, plain.text);
      assert.equal(poisoned.status, plain.status, poisoned.text);
      assert.deepEqual(poisoned.json, plain.json);
      // And "delegates" given as an object with a "__proto__" array inside is not a list.
      const objDelegates = await send(
        body.replace(
          JSON.stringify(noDelegates),
          JSON.stringify(noDelegates).replace(/\}$/, ',"delegates":{"__proto__":[]}}'),
        ),
      );
      assert.equal(objDelegates.status, 400, objDelegates.text);
      assert.equal(objDelegates.json.code, 7, objDelegates.text);
    });
  }
});

describe('a netconf nested 10,000 deep', () => {
  it('is code 7 (invalid config) from the daemon, not 104 (a stack overflow in the engine), and from the shim', async () => {
    const fx = join(env.dir, 'fx-deep');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('deepnet', '1.0.0', [fixturePlugin(fx)])]);
    const deep = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    const netns = env.netns();
    const wireEnv = {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'deep',
      CNI_NETNS: netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    };
    const body = `{"env":${JSON.stringify(wireEnv)},"config":${JSON.stringify(conf).replace(/\}$/, `,"deep":${deep}}`)}}`;
    const res = await daemon.request('POST', '/v1/cni', body);
    assert.equal(res.status, 400, res.text.slice(0, 300));
    assert.equal(res.json.code, 7);
    assert.match(res.json.msg, /deeper than 100 levels/);
    // Through the shim: refused (by the shim, which cannot re-encode it, or by the daemon), never a stack trace.
    const add = await shim(
      { command: 'ADD', containerId: 'deep', netns },
      JSON.stringify(conf).replace(/\}$/, `,"deep":${deep}}`),
    );
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json.code, 7, add.stdout);
    assert.equal(fixtureCalls(fx).length, 0);
  });
});

describe('a DEL whose netconf nests deeper than 100 levels', () => {
  it('is served, not refused (a refused DEL pins the sandbox): from the daemon, through the shim, and spooled while the daemon was down, each releasing its lease', async () => {
    const d = await startDaemon(env, 'deepdel');
    const dataDir = join(env.dir, 'deepdel-ipam');
    const conf = stewardConf(d.socket, '1.0.0', [
      delegate('deepdel', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    const deepConf = (c: object) =>
      JSON.stringify(c).replace(/\}$/, `,"runtimeConfig":{"x":${'['.repeat(150)}${']'.repeat(150)}}}`);
    const pods = ['dd-wire', 'dd-shim', 'dd-spool'].map((id) => ({ id, netns: env.netns() }));
    for (const p of pods)
      assert.equal((await shim({ command: 'ADD', containerId: p.id, netns: p.netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'deepdel').length, 3);
    const wireEnv = (id: string, netns: string) =>
      JSON.stringify({
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: id,
        CNI_NETNS: netns,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
      });
    const [wire, viaShim, spooled] = pods as [(typeof pods)[0], (typeof pods)[0], (typeof pods)[0]];
    const res = await d.request(
      'POST',
      '/v1/cni',
      `{"env":${wireEnv(wire.id, wire.netns)},"config":${deepConf(conf)}}`,
    );
    assert.equal(res.status, 200, res.text.slice(0, 300));
    const del = await shim({ command: 'DEL', containerId: viaShim.id, netns: viaShim.netns }, deepConf(conf));
    assert.equal(del.code, 0, del.stdout);
    for (const id of [wire.id, viaShim.id]) assert.equal((await d.attachment(id)).state, 'deleted');
    // An ADD so nested is still refused.
    const add = await shim({ command: 'ADD', containerId: 'dd-add', netns: wire.netns }, deepConf(conf));
    assert.equal(add.json?.code, 7, add.stdout);

    await d.stop();
    const down = await shim({ command: 'DEL', containerId: spooled.id, netns: spooled.netns }, deepConf(conf));
    assert.equal(down.code, 0, down.stdout);
    await d.start();
    await d.waitFor('the spooled DEL', async () => (await d.attachment(spooled.id)).state === 'deleted');
    assert.deepEqual(leases(dataDir, 'deepdel'), []);
    await d.stop();
  });
});

describe('error texts echoed back are capped', () => {
  it('a plugin error quoting a 100 KB CNI_ARGS: the ADD error, /v1/status, /v1/teardowns and /v1/attachments stay small', async () => {
    const fx = join(env.dir, 'fx-echo');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('echonet', '1.0.0', [fixturePlugin(fx, { failAdd: true, failDelAlways: true, echoArgs: true })]),
    ]);
    const args = `IgnoreUnknown=1;K8S_POD_NAME=${'x'.repeat(100 * 1024)}`;
    const add = await shim({ command: 'ADD', containerId: 'echo', netns, args }, conf);
    assert.notEqual(add.code, 0);
    assert.ok(add.json, add.stdout.slice(0, 300));
    assert.ok(Buffer.byteLength(add.json.msg) <= 1024 + 40, `msg is ${add.json.msg.length} bytes`);
    assert.match(add.json.msg, /… \[cut \d+ bytes\]$/);
    if (add.json.details !== undefined) assert.ok(Buffer.byteLength(add.json.details) <= 4096 + 40);
    assert.ok(add.stdout.length < 8 * 1024, `the shim printed ${add.stdout.length} bytes`);

    await daemon.waitFor('the rollback DEL to fail', () => fixtureCalls(fx, 'DEL').length >= 1);
    await daemon.waitFor('the failure in /v1/status', async () =>
      (await daemon.status()).lastErrors.some((e: any) => e.containerId === 'echo'),
    );
    const status = await daemon.get('/v1/status');
    assert.ok(status.text.length < 16 * 1024, `/v1/status is ${status.text.length} bytes`);
    for (const e of status.json.lastErrors) if (e.lastError) assert.ok(Buffer.byteLength(e.lastError) <= 1024 + 40);
    const teardowns = await daemon.get('/v1/teardowns');
    assert.ok(teardowns.text.length < 16 * 1024, `/v1/teardowns is ${teardowns.text.length} bytes`);
    const atts = await daemon.get('/v1/attachments?containerId=echo');
    assert.ok(atts.text.length < 16 * 1024, `/v1/attachments is ${atts.text.length} bytes`);
  });
});

describe('relative CNI_PATH entries', () => {
  it('are ignored with a warning in the log; the absolute ones still work', async () => {
    const fx = join(env.dir, 'fx-rel');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('relnet', '1.0.0', [fixturePlugin(fx)])]);
    const add = await shim(
      {
        command: 'ADD',
        containerId: 'relpath',
        netns: env.netns(),
        path: 'test/fixtures/bin:./relative-dir:/usr/lib/cni',
      },
      conf,
    );
    assert.equal(add.code, 0, add.stdout);
    await daemon.waitFor('the warning', () =>
      readFileSync(daemon.logFile, 'utf8').includes('relative CNI_PATH entry ignored'),
    );
    const lines = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('relative CNI_PATH entry ignored'));
    assert.ok(
      lines.some((l) => l.includes('"entry":"test/fixtures/bin"')),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => l.includes('"entry":"./relative-dir"')),
      lines.join('\n'),
    );
  });
});

describe('methods and bodies on the operator routes', () => {
  it('a path served under another method is 405 with Allow; an unknown path stays 404', async () => {
    const status = await daemon.request('POST', '/v1/status', '{}');
    assert.equal(status.status, 405, status.text);
    assert.equal(status.headers.allow, 'GET, HEAD');
    assert.match(status.json.error, /^POST is not served on \/v1\/status; use GET or HEAD$/);
    const retry = await daemon.get('/v1/teardowns/retry');
    assert.equal(retry.status, 405, retry.text);
    assert.equal(retry.headers.allow, 'POST');
    const cni = await daemon.get('/v1/cni?x=1');
    assert.equal(cni.status, 405, cni.text);
    assert.equal(cni.headers.allow, 'POST');
    assert.equal((await daemon.request('DELETE', '/v1/nothing-here')).status, 404);
    // Paths a route pattern would read as wildcards, parameters or regular expressions: plain 404s
    // (they were 500s when the check asked the router with the client's path as a pattern).
    for (const path of ['/a*b', '/v1/status*x', '/:(', '/v1/status:(', '/v1/status:x((a+)+)', '/v1/status:x(?<)']) {
      const res = await daemon.request('PUT', path);
      assert.equal(res.status, 404, `${path}: ${res.text}`);
    }
  });

  it('HEAD /v1/audit is 405 and runs no audit pass (GET and POST do)', async () => {
    const lastRun = async () =>
      /^steward_audit_last_run_timestamp_seconds \S+$/m.exec((await daemon.get('/metrics')).text)?.[0];
    const before = await lastRun();
    const head = await daemon.request('HEAD', '/v1/audit');
    assert.equal(head.status, 405);
    assert.equal(head.headers.allow, 'GET, POST');
    assert.equal(await lastRun(), before, 'HEAD ran an audit pass');
    // The contrast: a GET is a pass, and the metric moves (so the check above could fail).
    await new Promise((r) => setTimeout(r, 1100));
    const get = await daemon.get('/v1/audit');
    assert.equal(get.status, 200, get.text);
    assert.notEqual(await lastRun(), before);
  });

  it('a body that is not JSON is 400 with { error } on an operator route, a CNI error on /v1/cni', async () => {
    const retry = await daemon.request('POST', '/v1/teardowns/retry', '{"abandoned":');
    assert.equal(retry.status, 400, retry.text);
    assert.deepEqual(Object.keys(retry.json), ['error']);
    assert.match(retry.json.error, /^cannot decode request: /);
    // Past the body limit: answered from the Content-Length alone (a client still writing a body
    // that large can meet EPIPE), so only the headers are sent.
    const big = await rawExchange(
      daemon.socket,
      `POST /v1/teardowns/retry HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 << 20}\r\nConnection: close\r\n\r\n`,
    );
    assert.match(big, /^HTTP\/1\.1 413 /, big.slice(0, 300));
    assert.match(big, /\{"error":"request body is larger than \d+ bytes"\}$/);
    const cni = await daemon.request('POST', '/v1/cni', '{"cniVersion":');
    assert.equal(cni.json.code, 6, cni.text);
    assert.match(cni.json.msg, /decode/);
  });

  it('a coded body (gzip, br) or one that is not JSON (XML, text/plain) is 415 saying which; no body, or identity, is served', async () => {
    const post = (headers: string, body: Buffer) =>
      rawExchange(
        daemon.socket,
        Buffer.concat([
          Buffer.from(
            `POST /v1/teardowns/retry HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
          ),
          body,
        ]),
      );
    const json = 'Content-Type: application/json\r\n';
    // Read as it was, a gzip body was "not valid JSON" (400) and a "br" one of plain JSON was served.
    const gz = await post(`${json}Content-Encoding: gzip\r\n`, gzipSync('{}'));
    assert.match(gz, /^HTTP\/1\.1 415 /, gz);
    assert.match(gz, /^accept-encoding: identity\r$/im);
    assert.match(gz, /\{"error":"a body with Content-Encoding \\"gzip\\" is not taken: send it unencoded"\}$/);
    assert.match(await post(`${json}Content-Encoding: br\r\n`, Buffer.from('{}')), /^HTTP\/1\.1 415 /);
    const xml = await post('Content-Type: application/xml\r\n', Buffer.from('<a/>'));
    assert.match(xml, /^HTTP\/1\.1 415 /, xml);
    assert.match(xml, /"a body of Content-Type \\"application\/xml\\" is not taken: send application\/json"/);
    // Fastify parses text/plain of its own accord: a route was handed a string, and the retry ran.
    const text = await post('Content-Type: text/plain\r\n', Buffer.from('garbage'));
    assert.match(text, /^HTTP\/1\.1 415 /, text);
    assert.match(text, /"a body of Content-Type \\"text\/plain\\" is not taken: send application\/json"/);
    assert.match(await post(`${json}Content-Encoding: identity\r\n`, Buffer.from('{}')), /^HTTP\/1\.1 200 /);
    // A list of no coding is no coding (RFC 9110 8.4): empty, or "identity" twice. Two headers are one
    // list (Node joins them), so identity then gzip is still a coded body.
    for (const none of ['Content-Encoding:\r\n', 'Content-Encoding: identity, IDENTITY\r\n', 'Content-Encoding: ,\r\n'])
      assert.match(await post(`${json}${none}`, Buffer.from('{}')), /^HTTP\/1\.1 200 /, none);
    const twice = await post(`${json}Content-Encoding: identity\r\nContent-Encoding: gzip\r\n`, gzipSync('{}'));
    assert.match(twice, /^HTTP\/1\.1 415 /, twice);
    assert.match(twice, /Content-Encoding \\"identity, gzip\\" is not taken/);
    const status = await rawExchange(
      daemon.socket,
      'GET /v1/status HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n',
    );
    assert.match(status, /^HTTP\/1\.1 200 /, 'a coding named with no body in it is no body to refuse');
  });
});

describe('query parameters a route does not take, and paths that do not decode', () => {
  it('an unknown query parameter is 400 naming it and what the route takes (a filter misspelt listed every row)', async () => {
    for (const [path, key, takes] of [
      ['/v1/attachments?container=c1', 'container', 'containerId, state, pod, limit'],
      ['/v1/attachments?State=deleted', 'State', 'containerId, state, pod, limit'],
      ['/v1/attachments?limit[a]=1', 'limit[a]', 'containerId, state, pod, limit'],
      ['/v1/status?verbose=1', 'verbose', 'none'],
      ['/readyz?x', 'x', 'none'],
      ['/v1/audit?release=true', 'release', 'runtimeEndpoint, deadline'],
    ] as const) {
      const res = await daemon.get(path);
      assert.equal(res.status, 400, `${path}: ${res.text}`);
      assert.equal(res.json.error, `unknown query parameter "${key}": ${path.split('?')[0]} takes ${takes}`);
    }
    const retry = await daemon.request('POST', '/v1/teardowns/retry?abandonned=true');
    assert.equal(retry.status, 400, retry.text);
    assert.match(retry.json.error, /^unknown query parameter "abandonned": \/v1\/teardowns\/retry takes abandoned$/);
    assert.equal((await daemon.get('/v1/attachments?containerId=c1&limit=5')).status, 200, 'the keys it takes');
  });

  it('release=1 and abandoned=1 are accepted as true; other values say so', async () => {
    const audit = await daemon.request('POST', '/v1/audit?release=yes');
    assert.equal(audit.status, 400);
    assert.equal(audit.json.error, 'release must be true or false (or 1 or 0)');
    const retry = await daemon.request('POST', '/v1/teardowns/retry?abandoned=yes');
    assert.equal(retry.json.error, 'abandoned must be true or false (or 1 or 0)');
    assert.equal((await daemon.request('POST', '/v1/teardowns/retry?abandoned=1')).status, 200);
  });

  it('a path that does not decode is 400 with { error }; an encoded path served under another method is 405', async () => {
    const bad = await daemon.get('/v1/%ZZ');
    assert.equal(bad.status, 400, bad.text);
    assert.deepEqual(Object.keys(bad.json), ['error']);
    const patch = await daemon.request('PATCH', '/v1/%73tatus');
    assert.equal(patch.status, 405, patch.text);
    assert.equal(patch.headers.allow, 'GET, HEAD');
  });

  it('an encoded slash is no route: 404, not a 405 offering the method asked', async () => {
    for (const [method, path] of [
      ['GET', '/v1%2Fstatus'],
      ['POST', '/v1%2fteardowns%2fretry'],
    ] as const) {
      const res = await daemon.request(method, path);
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(res.headers.allow, undefined);
    }
  });

  it('a request target with a fragment is 400 saying so, not read as a query', async () => {
    for (const target of ['/v1/attachments#limit=1', '/v1/status#f', '/nowhere#x']) {
      const answer = await rawExchange(daemon.socket, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 400 /, target);
      assert.match(answer, /"error":"a request target holds no fragment/, target);
    }
  });

  it("an HTTP/1.1 request without Host is 400 saying so, in the route's shape; one of HTTP/1.0 is served", async () => {
    // Node's own answer was a bare 400: no body, no protocol header.
    const status = await rawExchange(daemon.socket, 'GET /v1/status HTTP/1.1\r\nConnection: close\r\n\r\n');
    assert.match(status, /^HTTP\/1\.1 400 /, status);
    assert.match(status, /^x-steward-protocol: \d+\r$/im);
    assert.match(status, /\{"error":"an HTTP\/1\.1 request names its Host: send \\"Host: localhost\\""\}$/);
    const cni = await rawExchange(
      daemon.socket,
      'POST /v1/cni HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    );
    assert.match(cni, /^HTTP\/1\.1 400 /, cni);
    assert.match(cni, /"code":6,"msg":"an HTTP\/1\.1 request names its Host/, cni);
    // As the shim sends it (hinted, raw JSON: admission serves it without fastify's hooks).
    const hinted = await rawExchange(
      daemon.socket,
      'POST /v1/cni HTTP/1.1\r\nContent-Type: application/json\r\nX-CNI-Command: VERSION\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    );
    assert.match(hinted, /^HTTP\/1\.1 400 /, hinted);
    assert.match(hinted, /^x-steward-protocol: \d+\r$/im);
    assert.match(hinted, /"code":6,"msg":"an HTTP\/1\.1 request names its Host/, hinted);
    assert.match(await rawExchange(daemon.socket, 'GET /v1/status HTTP/1.0\r\n\r\n'), /^HTTP\/1\.1 200 /);
  });

  it('an Expect other than 100-continue is 417 saying so; 100-continue is served', async () => {
    const answer = await rawExchange(
      daemon.socket,
      'POST /v1/teardowns/retry HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    assert.match(answer, /^HTTP\/1\.1 417 /, answer);
    assert.match(answer, /^x-steward-protocol: \d+\r$/im);
    assert.match(answer, /\{"error":"Expect \\"200-ok\\" cannot be met: only 100-continue is"\}$/);
    const cni = await rawExchange(
      daemon.socket,
      'POST /v1/cni HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    assert.match(cni, /^HTTP\/1\.1 417 /, cni);
    assert.match(cni, /"code":6,"msg":"Expect \\"200-ok\\" cannot be met/, cni);
    const go = await rawExchange(
      daemon.socket,
      'POST /v1/teardowns/retry HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    );
    assert.match(go, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /, go);
  });
});

describe('idle connections on the socket', () => {
  it('a connection silent for 10 s with no request in flight is closed, and one dripping its headers; an ADD waiting 12 s for its plugin is answered', async () => {
    const fx = join(env.dir, 'fx-idle');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('idlenet', '1.0.0', [fixturePlugin(fx, { sleepAddMs: 12_000 })]),
    ]);
    const idle = Array.from({ length: 20 }, () => connect(daemon.socket));
    const closedAt: number[] = [];
    const t0 = Date.now();
    for (const c of idle) {
      c.on('error', () => undefined);
      c.on('close', () => closedAt.push(Date.now() - t0));
    }
    // A header byte a second: never silent, but its headers are not all there 10 s after the first.
    const drip = connect(daemon.socket);
    drip.on('error', () => undefined);
    let dripAnswer = '';
    let dripClosedAt = -1;
    drip.on('data', (d: Buffer) => (dripAnswer += d.toString()));
    drip.on('close', () => (dripClosedAt = Date.now() - t0));
    drip.write('GET /v1/status HTTP/1.1\r\nX-Slow: ');
    const dripping = setInterval(() => drip.writable && drip.write('a'), 1000);
    const add = await shim({ command: 'ADD', containerId: 'idle-add', netns: env.netns() }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.ok(Date.now() - t0 >= 12_000, 'the ADD waited for its plugin');
    assert.equal(closedAt.length, 20, 'every silent connection was closed');
    for (const ms of closedAt) assert.ok(ms >= 9_000 && ms < 12_500, `closed after ${ms} ms`);
    clearInterval(dripping);
    assert.ok(dripClosedAt >= 9_000 && dripClosedAt < 12_500, `the dripping one closed after ${dripClosedAt} ms`);
    assert.match(dripAnswer, /^HTTP\/1\.1 408 /);
    assert.equal((await shim({ command: 'DEL', containerId: 'idle-add', netns: '' }, conf)).code, 0);
  });
});

describe('pipelined requests on one connection', () => {
  const GET = 'GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n';

  it('ten at once are all answered, in order (a slower /healthz ahead of each /readyz)', async () => {
    const HEALTH = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    const last = GET.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n');
    const text = await rawExchange(daemon.socket, (HEALTH + GET).repeat(4) + HEALTH + last);
    // /healthz pings the spawner before it answers, /readyz answers at once: out of order they would not alternate.
    assert.deepEqual(
      text.match(/\{"(?:ok|ready)":true\}/g),
      Array(5).fill(['{"ok":true}', '{"ready":true}']).flat(),
      text.slice(0, 400),
    );
  });

  it('a connection that pipelines two at a time, 100 times over, is answered 200 times (answers out are no longer in flight)', async () => {
    const c = connect(daemon.socket);
    let text = '';
    let closed = false;
    c.on('data', (d: Buffer) => (text += d.toString('utf8')));
    c.on('close', () => (closed = true));
    try {
      for (let round = 1; round <= 100; round++) {
        c.write(GET + GET);
        await daemon.waitFor(
          `answers of round ${round}`,
          async () => closed || (text.match(/HTTP\/1\.1 200 /g)?.length ?? 0) >= 2 * round,
          5_000,
        );
        assert.equal(closed, false, `closed in round ${round}`);
      }
    } finally {
      c.destroy();
    }
  });

  it(`a client that pipelines 1,000 at once is closed once more than ${MAX_IN_FLIGHT_PER_CONNECTION} are in flight, and said so; the daemon serves on`, async () => {
    const c = connect(daemon.socket);
    c.on('error', () => undefined);
    // Reading or not: all 1,000 arrive in one read, and none is answered before the next is parsed.
    // Within 3 s: before node's keep-alive timeout (5 s) would close it once its answers were out.
    c.resume();
    const closed = new Promise<void>((resolve) => c.on('close', () => resolve()));
    c.write(GET.repeat(1000));
    const timeout = new Promise<string>((r) => setTimeout(() => r('still open after 3 s'), 3_000).unref());
    assert.equal(await Promise.race([closed.then(() => 'closed'), timeout]), 'closed');
    assert.match(
      readFileSync(daemon.logFile, 'utf8'),
      /"inFlight":65,"max":64,"msg":"a connection had more requests in flight than a connection may: closed"/,
    );
    assert.equal((await daemon.get('/readyz')).status, 200);
  });
});

/** One raw HTTP exchange on the socket: what the daemon wrote until it closed the connection. */
function rawExchange(socket: string, request: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = connect(socket);
    const chunks: Buffer[] = [];
    c.on('data', (d: Buffer) => chunks.push(d));
    c.on('error', reject);
    c.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    c.setTimeout(10_000, () => c.destroy(new Error('no answer in 10 s')));
    c.write(request);
  });
}
