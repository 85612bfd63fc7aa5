// Issue 28 item 4: one matcher of the CNI route. fastify's router maps other spellings of
// POST /v1/cni to the CNI handler (a query string, a fragment, percent-encoding, the absolute
// form), and those skipped the protocol check and the DEL admission caps, which only the exact
// target got: a shim speaking protocol 999 was served 200. Every other spelling is now refused
// with a CNI error before its body is read, hinted or not; the exact target keeps its checks.
// Raw bytes over the real socket, so each target reaches the daemon exactly as written.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { PROTOCOL_HEADER, PROTOCOL_VERSION } from '@cni-steward/shared';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, SYSTEM_CNI_BIN } from '../helpers/env.js';
import { delegate, fixturePlugin, hintedWire, stewardConf } from '../helpers/netconf.js';

const env = new TestEnv('route');
const daemon = new Daemon(env);
const fxState = join(env.dir, 'fx');
let netns = '';
before(async () => {
  await daemon.start();
  netns = env.netns();
});
after(() => env.close());

/** One raw request, its answer's status and JSON body (the connection is closed after it). */
function post(target: string, headers: Record<string, string>, body: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const sock = connect(daemon.socket);
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no answer to POST ${target}`));
    }, 20_000);
    sock.on('data', (b: Buffer) => (buf += b.toString('utf8')));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(buf)?.[1] ?? 0);
      const text = buf.slice(buf.indexOf('\r\n\r\n') + 4);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      resolve({ status, json });
    });
    const head = Object.entries({
      Host: 'localhost',
      Connection: 'close',
      'Content-Type': 'application/json',
      'Content-Length': String(Buffer.byteLength(body)),
      ...headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    sock.write(`POST ${target} HTTP/1.1\r\n${head}\r\n${body}`);
  });
}

const conf = () => stewardConf(daemon.socket, '1.0.0', [delegate('routenet', '1.0.0', [fixturePlugin(fxState, {})])]);

const FORMS = [
  '/v1/cni?x=1',
  '/v1/cni?',
  '/v1/%63ni',
  '/v1%2Fcni',
  '/v1/cni#frag',
  'http://localhost/v1/cni',
  'HTTP://localhost/v1/cni?x=1',
  '/v1/cni/',
  '//v1/cni',
  '/v1//cni',
  '/v1/cni;x=1',
  '/V1/CNI',
];

describe('the CNI route is the exact target /v1/cni', () => {
  it('the exact target with protocol 999 is refused with code 108 (the check every form must get)', async () => {
    const w = hintedWire('ADD', 'route-exact', netns, conf(), SYSTEM_CNI_BIN);
    const a = await post('/v1/cni', { ...w.hints, [PROTOCOL_HEADER]: '999' }, w.body);
    assert.equal(a.status, 409);
    assert.equal(a.json.code, 108);
  });

  for (const form of FORMS) {
    for (const hinted of [true, false]) {
      it(`${form} (${hinted ? 'with' : 'without'} hints, protocol 999): refused with code 6, nothing run`, async () => {
        const w = hintedWire('ADD', `route-${FORMS.indexOf(form)}-${hinted}`, netns, conf(), SYSTEM_CNI_BIN);
        const a = await post(form, { ...(hinted ? w.hints : {}), [PROTOCOL_HEADER]: '999' }, w.body);
        assert.equal(a.status, 400, JSON.stringify(a.json));
        assert.equal(a.json.code, 6, JSON.stringify(a.json));
        assert.match(a.json.msg, /the CNI route is exactly POST \/v1\/cni; request target .* is refused/);
        // With this daemon's own protocol too: another spelling is never served.
        const b = await post(form, { ...(hinted ? w.hints : {}), [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) }, w.body);
        assert.equal(b.status, 400, JSON.stringify(b.json));
        assert.deepEqual(fixtureCalls(fxState), []);
      });
    }
  }

  it('a DEL to another spelling is refused before admission: no DEL waits or is admitted', async () => {
    const w = hintedWire('DEL', 'route-del', netns, conf(), SYSTEM_CNI_BIN);
    const answers = await Promise.all(FORMS.map((f) => post(f, w.hints, w.body)));
    for (const a of answers) assert.equal(a.status, 400);
    const adm = (await daemon.status()).admission;
    assert.equal(adm.delsWaiting + adm.delsAdmitted, 0);
    assert.deepEqual(fixtureCalls(fxState), []);
  });

  it('the exact target is served, and other routes with a query string are not affected', async () => {
    const w = hintedWire('ADD', 'route-ok', netns, conf(), SYSTEM_CNI_BIN);
    const a = await post('/v1/cni', { ...w.hints, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) }, w.body);
    assert.equal(a.status, 200, JSON.stringify(a.json));
    const d = hintedWire('DEL', 'route-ok', netns, conf(), SYSTEM_CNI_BIN);
    assert.equal((await post('/v1/cni', d.hints, d.body)).status, 200);
    assert.equal((await daemon.get('/v1/attachments?containerId=route-ok')).status, 200);
  });
});
