import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  CNI_ENV_VARS,
  CNI_ROUTE,
  DEFAULT_SHIM_TIMEOUT_MS,
  DEFAULT_SOCKET,
  DEFAULT_SPOOL_DIR,
  LATEST_VERSION,
  MAX_NETCONF_BYTES,
  MAX_REQUEST_BYTES,
} from '@cni-steward/shared';
import { UnreachableError, type Reply } from '../../shim/src/client.js';
import { runShim, type ShimIO } from '../../shim/src/skel.js';

const ADD_ENV = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'abc123',
  CNI_NETNS: '/var/run/netns/cni-1',
  CNI_IFNAME: 'eth0',
  CNI_ARGS: 'IgnoreUnknown=1',
  CNI_PATH: '/opt/cni/bin',
  HOME: '/root',
  PATH: '/usr/bin:/bin',
  KUBECONFIG: '/etc/secret',
};
const DEL_ENV = { ...ADD_ENV, CNI_COMMAND: 'DEL' };

const NETCONF = {
  cniVersion: '1.0.0',
  name: 'steward-net',
  type: 'steward',
  socket: '/tmp/test-steward.sock',
  spoolDir: '/tmp/test-spool',
  delegates: [{ name: 'podnet', type: 'bridge' }],
};

interface SendCall {
  socket: string;
  route: string;
  body: string;
  timeoutMs: number;
}
interface SpoolCall {
  dir: string;
  containerId: string;
  body: string;
}

/** Fake I/O: records every send and spool; `reply` decides what send does. */
function fakeIO(
  opts: {
    env?: Record<string, string | undefined>;
    stdin?: Buffer | string | object;
    reply?: (call: SendCall) => Promise<Reply>;
    spool?: (call: SpoolCall) => string;
  } = {},
) {
  const sends: SendCall[] = [];
  const spools: SpoolCall[] = [];
  const stdin =
    opts.stdin === undefined
      ? Buffer.from(JSON.stringify(NETCONF))
      : Buffer.isBuffer(opts.stdin)
        ? opts.stdin
        : Buffer.from(typeof opts.stdin === 'string' ? opts.stdin : JSON.stringify(opts.stdin));
  const io: ShimIO = {
    env: opts.env ?? ADD_ENV,
    stdin,
    send: async (socket, route, body, timeoutMs) => {
      const call = { socket, route, body, timeoutMs };
      sends.push(call);
      return opts.reply ? opts.reply(call) : { status: 200, body: '{"cniVersion":"1.0.0"}', protocol: '2' };
    },
    spool: (dir, containerId, body) => {
      const call = { dir, containerId, body };
      spools.push(call);
      return opts.spool ? opts.spool(call) : `${dir}/${containerId}.json`;
    },
  };
  return { io, sends, spools };
}

const unreachable = () => Promise.reject(new UnreachableError('ECONNREFUSED'));

function cniErrorOut(out: { stdout: string; exitCode: number }, code: number) {
  assert.equal(out.exitCode, 1, `exit code for a CNI error (stdout ${out.stdout})`);
  const err = JSON.parse(out.stdout) as { code: number; msg: string; cniVersion: string };
  assert.equal(err.code, code, `code ${err.code}: ${err.msg}`);
  assert.equal(typeof err.msg, 'string');
  return err;
}

describe('runShim', () => {
  test('answers VERSION with all five supported versions without calling the daemon', async () => {
    const { io, sends } = fakeIO({ env: { CNI_COMMAND: 'VERSION' }, stdin: { cniVersion: '1.0.0' } });
    const out = await runShim(io);
    assert.equal(out.exitCode, 0);
    assert.deepEqual(JSON.parse(out.stdout), {
      cniVersion: '1.0.0',
      supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
    assert.equal(sends.length, 0);
  });

  test('answers VERSION with empty stdin in the latest version', async () => {
    const { io, sends } = fakeIO({ env: { CNI_COMMAND: 'VERSION' }, stdin: Buffer.alloc(0) });
    const out = await runShim(io);
    assert.equal(out.exitCode, 0);
    const v = JSON.parse(out.stdout) as { cniVersion: string; supportedVersions: string[] };
    assert.equal(v.cniVersion, '1.1.0');
    assert.equal(v.supportedVersions.length, 5);
    assert.equal(sends.length, 0);
  });

  test("reports every missing CNI variable in one code 4 error, in the netconf's cniVersion", async () => {
    const { io, sends } = fakeIO({ env: { CNI_COMMAND: 'ADD', HOME: '/root' } });
    const err = cniErrorOut(await runShim(io), 4);
    for (const v of ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH']) {
      assert.ok(err.msg.includes(v), `"${err.msg}" should name ${v}`);
    }
    assert.equal(err.cniVersion, '1.0.0');
    assert.equal(sends.length, 0);
  });

  test('reports a missing CNI_COMMAND with code 4', async () => {
    const { io } = fakeIO({ env: {} });
    const err = cniErrorOut(await runShim(io), 4);
    assert.match(err.msg, /CNI_COMMAND/);
  });

  test('reports malformed JSON on stdin with code 6', async () => {
    const { io, sends } = fakeIO({ stdin: '{"cniVersion": "1.0.0", ' });
    cniErrorOut(await runShim(io), 6);
    assert.equal(sends.length, 0);
  });

  test('reports a JSON value that is not an object with code 6', async () => {
    const { io } = fakeIO({ stdin: '[1,2,3]' });
    cniErrorOut(await runShim(io), 6);
  });

  test('reports empty stdin on ADD with code 6', async () => {
    const { io } = fakeIO({ stdin: Buffer.alloc(0) });
    cniErrorOut(await runShim(io), 6);
  });

  test('refuses stdin of MAX_NETCONF_BYTES + 1 bytes with code 7, even when it is valid JSON', async () => {
    const json = JSON.stringify(NETCONF);
    const big = Buffer.alloc(MAX_NETCONF_BYTES + 1, 0x20);
    big.write(json, 0, 'utf8');
    const { io, sends } = fakeIO({ stdin: big });
    const err = cniErrorOut(await runShim(io), 7);
    assert.ok(err.msg.includes(String(MAX_NETCONF_BYTES)), err.msg);
    assert.equal(sends.length, 0);
  });

  test('accepts stdin of exactly MAX_NETCONF_BYTES bytes', async () => {
    const json = JSON.stringify(NETCONF);
    const exact = Buffer.alloc(MAX_NETCONF_BYTES, 0x20);
    exact.write(json, 0, 'utf8');
    const { io, sends } = fakeIO({ stdin: exact });
    const out = await runShim(io);
    assert.equal(out.exitCode, 0);
    assert.equal(sends.length, 1);
  });

  test('an unreachable daemon on ADD is code 11 naming the socket, and nothing is spooled', async () => {
    const { io, spools } = fakeIO({ reply: unreachable });
    const err = cniErrorOut(await runShim(io), 11);
    assert.ok(err.msg.includes('/tmp/test-steward.sock'), err.msg);
    assert.ok(err.msg.includes('ECONNREFUSED'), err.msg);
    assert.equal(spools.length, 0);
  });

  test("an unreachable daemon on DEL spools the request to the netconf's spoolDir and succeeds silently", async () => {
    const { io, sends, spools } = fakeIO({ env: DEL_ENV, reply: unreachable });
    const out = await runShim(io);
    assert.deepEqual(out, { stdout: '', exitCode: 0 });
    assert.equal(spools.length, 1);
    assert.equal(spools[0]?.dir, '/tmp/test-spool');
    assert.equal(spools[0]?.containerId, 'abc123');
    assert.equal(spools[0]?.body, sends[0]?.body, 'the spooled body is the request that could not be sent');
  });

  test('an unreachable daemon on DEL spools to /var/lib/steward/spool when the netconf names no spoolDir', async () => {
    const { spoolDir: _d, ...withoutSpool } = NETCONF;
    const { io, spools } = fakeIO({ env: DEL_ENV, stdin: withoutSpool, reply: unreachable });
    assert.deepEqual(await runShim(io), { stdout: '', exitCode: 0 });
    assert.equal(spools[0]?.dir, '/var/lib/steward/spool');
  });

  test('a relative spoolDir is code 7 before anything is sent or spooled (a spooled DEL there would be lost)', async () => {
    for (const spoolDir of ['spool', './spool', '']) {
      const { io, sends, spools } = fakeIO({ env: ADD_ENV, stdin: { ...NETCONF, spoolDir }, reply: unreachable });
      const err = cniErrorOut(await runShim(io), 7);
      assert.match(err.msg, /"spoolDir" must be an absolute path/);
      assert.equal(sends.length + spools.length, 0, spoolDir);
    }
  });

  test("a DEL is not refused for the shim's own keys: a bad socket, spoolDir or timeouts falls back to its default", async () => {
    // A DEL refused for them would fail on every retry and pin the sandbox; stewardd tears down
    // from the ADD's stored config, so the DEL is sent (or spooled) with the defaults instead.
    const bad = { socket: 'relative.sock', spoolDir: 'spool', timeouts: { delete: 5000 } };
    const nul = fakeIO({ env: DEL_ENV, stdin: { ...NETCONF, spoolDir: '/tmp/sp\u0000ool' }, reply: unreachable });
    assert.equal((await runShim(nul.io)).exitCode, 0);
    assert.deepEqual(
      nul.spools.map((c) => c.dir),
      [DEFAULT_SPOOL_DIR],
    );
    const { io, sends, spools } = fakeIO({ env: DEL_ENV, stdin: { ...NETCONF, ...bad }, reply: unreachable });
    const out = await runShim(io);
    assert.equal(out.exitCode, 0, out.stdout);
    assert.equal(sends.length, 1);
    assert.equal(sends[0]!.socket, DEFAULT_SOCKET);
    assert.equal(sends[0]!.timeoutMs, DEFAULT_SHIM_TIMEOUT_MS);
    assert.deepEqual(
      spools.map((c) => c.dir),
      [DEFAULT_SPOOL_DIR],
    );
    // The same keys on ADD are code 7, each, and nothing is sent.
    for (const [k, v] of Object.entries(bad)) {
      const add = fakeIO({ env: ADD_ENV, stdin: { ...NETCONF, [k]: v } });
      cniErrorOut(await runShim(add.io), 7);
      assert.equal(add.sends.length, 0, k);
    }
  });

  test('a socket path that cannot name a Unix socket is code 7 (relative, or over 107 bytes)', async () => {
    for (const socket of ['run/s.sock', `/${'d'.repeat(107)}`, '/run/steward/s.sock\u0000x']) {
      const { io, sends } = fakeIO({ env: ADD_ENV, stdin: { ...NETCONF, socket } });
      const err = cniErrorOut(await runShim(io), 7);
      assert.match(err.msg, /"socket"/);
      assert.equal(sends.length, 0);
    }
    const ok = fakeIO({ env: ADD_ENV, stdin: { ...NETCONF, socket: `/${'d'.repeat(106)}` } });
    assert.equal((await runShim(ok.io)).exitCode, 0);
  });

  test('a request larger than stewardd reads is code 7, not sent and not spooled', async () => {
    // Under the stdin bound, but the CNI_* variables push the request over what the daemon reads.
    const env = { ...DEL_ENV, CNI_ARGS: `K8S_POD_NAME=${'p'.repeat(120_000)}` };
    const stdin = { ...NETCONF, pad: 'x'.repeat(MAX_NETCONF_BYTES - 1000) };
    const { io, sends, spools } = fakeIO({ env, stdin, reply: unreachable });
    const err = cniErrorOut(await runShim(io), 7);
    assert.match(err.msg, new RegExp(`more than the ${MAX_REQUEST_BYTES} stewardd reads`));
    assert.equal(sends.length + spools.length, 0);
  });

  test('VERSION answers with a version it speaks, never an echo of what came in', async () => {
    for (const [asked, answered] of [
      ['0.4.0', '0.4.0'],
      ['9.9.9', LATEST_VERSION],
      ['', LATEST_VERSION],
      ['x"y', LATEST_VERSION],
    ] as const) {
      const { io } = fakeIO({ env: { CNI_COMMAND: 'VERSION' }, stdin: { cniVersion: asked } });
      const out = await runShim(io);
      assert.equal(out.exitCode, 0);
      assert.equal(JSON.parse(out.stdout).cniVersion, answered, asked);
    }
  });

  test('STATUS passes on an error in the request itself with its own code; the daemon not serving is 50', async () => {
    const STATUS_ENV = { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' };
    const answer = (code: number) => () =>
      Promise.resolve({
        status: 400,
        body: JSON.stringify({ cniVersion: '1.1.0', code, msg: `m${code}` }),
        protocol: '2',
      });
    for (const [code, out] of [
      [1, 1],
      [7, 7],
      [51, 51], // a delegate's own STATUS answer
      [100, 100], // a delegate that could not be run
      [11, 50], // stewardd not serving (not ready, degraded, shutting down)
      [104, 50],
    ] as const) {
      const { io } = fakeIO({ env: STATUS_ENV, stdin: { ...NETCONF, cniVersion: '1.1.0' }, reply: answer(code) });
      cniErrorOut(await runShim(io), out);
    }
  });

  test('STATUS refuses bad "timeouts" as ADD does (7): it must not report ready for a netconf no ADD accepts', async () => {
    const STATUS_ENV = { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' };
    for (const timeouts of [{ add: 0 }, { bogus: 5 }, { status: 5 }]) {
      const { io, sends } = fakeIO({ env: STATUS_ENV, stdin: { ...NETCONF, cniVersion: '1.1.0', timeouts } });
      cniErrorOut(await runShim(io), 7);
      assert.equal(sends.length, 0, JSON.stringify(timeouts));
    }
  });

  test('a name with a lone UTF-16 surrogate is sent without that hint, not a shim crash (104)', async () => {
    const { io, sends } = fakeIO({
      env: ADD_ENV,
      stdin: '{"cniVersion":"1.0.0","name":"n\\ud800x","type":"steward","delegates":[]}',
    });
    const out = await runShim(io);
    assert.equal(out.exitCode, 0, out.stdout);
    assert.equal(sends.length, 1);
  });

  test('a DEL that can be neither sent nor spooled is code 11', async () => {
    const { io, spools } = fakeIO({
      env: DEL_ENV,
      reply: unreachable,
      spool: () => {
        throw new Error('EROFS: read-only file system');
      },
    });
    const err = cniErrorOut(await runShim(io), 11);
    assert.equal(spools.length, 1);
    assert.ok(err.msg.includes('EROFS'), err.msg);
    assert.ok(err.msg.includes('/tmp/test-spool'), err.msg);
  });

  test('an error from send that is not UnreachableError is not spooled: it is code 104 on stdout', async () => {
    const { io, spools } = fakeIO({ env: DEL_ENV, reply: () => Promise.reject(new TypeError('bug in client')) });
    const err = cniErrorOut(await runShim(io), 104);
    assert.match(err.msg, /bug in client/);
    assert.equal(spools.length, 0);
  });

  test('prints a 200 reply body verbatim with exit 0', async () => {
    const body = '{ "cniVersion":"1.0.0",\n  "interfaces": [{"name":"eth0"}], "ips": [] }\n';
    const { io } = fakeIO({ reply: async () => ({ status: 200, body, protocol: '2' }) });
    assert.deepEqual(await runShim(io), { stdout: body, exitCode: 0 });
  });

  test('prints a non-200 reply carrying a CNI error verbatim with exit 1', async () => {
    const body = '{"cniVersion":"1.0.0","code":7,"msg":"invalid steward netconf","details":"x"}';
    const { io } = fakeIO({ reply: async () => ({ status: 400, body, protocol: '2' }) });
    assert.deepEqual(await runShim(io), { stdout: body, exitCode: 1 });
  });

  test('a DEL failure never says "not found" or "no such file or directory", whoever wrote it', async () => {
    const body =
      '{"cniVersion":"0.4.0","code":11,"msg":"plugin xyz not found","details":"open /x: no such file or directory"}';
    const { io } = fakeIO({ env: DEL_ENV, reply: async () => ({ status: 500, body, protocol: '2' }) });
    const out = await runShim(io);
    assert.equal(out.exitCode, 1);
    assert.doesNotMatch(out.stdout, /not found|no such file or directory/i);
    const err = JSON.parse(out.stdout) as { code: number; cniVersion: string; msg: string };
    assert.equal(err.code, 11);
    assert.equal(err.cniVersion, '0.4.0');
    const spoolFail = fakeIO({
      env: DEL_ENV,
      reply: unreachable,
      spool: () => {
        throw new Error('ENOENT: no such file or directory, open x');
      },
    });
    const out2 = await runShim(spoolFail.io);
    assert.equal(out2.exitCode, 1);
    assert.doesNotMatch(out2.stdout, /not found|no such file or directory/i);
  });

  test('an ADD failure from the daemon is printed verbatim, words and all', async () => {
    const body = '{"cniVersion":"1.0.0","code":7,"msg":"plugin xyz not found"}';
    const { io } = fakeIO({ reply: async () => ({ status: 400, body, protocol: '2' }) });
    assert.deepEqual(await runShim(io), { stdout: body, exitCode: 1 });
  });

  test('a netconf nested 100,000 deep (parses, but cannot be re-encoded) is code 7, not a stack trace (found by the fuzzer)', async () => {
    const deep = `{"cniVersion":"1.0.0","name":"n","type":"steward","x":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`;
    const { io, sends } = fakeIO({ stdin: deep });
    const err = cniErrorOut(await runShim(io), 7);
    assert.match(err.msg, /cannot be forwarded/);
    assert.equal(sends.length, 0);
  });

  test('an unexpected exception inside the shim is still a CNI error on stdout (code 104)', async () => {
    const { io } = fakeIO({
      reply: () => {
        throw new TypeError('boom');
      },
    });
    const err = cniErrorOut(await runShim(io), 104);
    assert.match(err.msg, /unexpected error: boom/);
  });

  test('a control character in a CNI variable is code 4', async () => {
    const { io, sends } = fakeIO({ env: { ...ADD_ENV, CNI_ARGS: 'K=a\u0000b' } });
    const err = cniErrorOut(await runShim(io), 4);
    assert.match(err.msg, /CNI_ARGS contains control characters/);
    assert.equal(sends.length, 0);
  });

  test('turns a non-200 reply without a CNI error into code 104', async () => {
    for (const body of ['<html>502 Bad Gateway</html>', '{"error":"no route POST /v1/cni"}', '']) {
      const { io } = fakeIO({ reply: async () => ({ status: 502, body, protocol: '2' }) });
      const err = cniErrorOut(await runShim(io), 104);
      assert.ok(err.msg.includes('502'), err.msg);
    }
  });

  test('sends only the CNI_* variables and the netconf to the daemon', async () => {
    const { io, sends } = fakeIO();
    await runShim(io);
    assert.equal(sends.length, 1);
    assert.equal(sends[0]?.route, CNI_ROUTE);
    const sent = JSON.parse(sends[0]?.body ?? '') as { env: Record<string, string>; config: unknown };
    assert.deepEqual(Object.keys(sent).sort(), ['config', 'env']);
    assert.deepEqual(sent.config, NETCONF);
    assert.deepEqual(sent.env, {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'abc123',
      CNI_NETNS: '/var/run/netns/cni-1',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1',
      CNI_PATH: '/opt/cni/bin',
    });
    for (const k of Object.keys(sent.env)) assert.ok((CNI_ENV_VARS as readonly string[]).includes(k), k);
    assert.ok(!('HOME' in sent.env) && !('KUBECONFIG' in sent.env));
  });

  test("uses the netconf's socket, and /run/steward/stewardd.sock when it names none", async () => {
    const named = fakeIO();
    await runShim(named.io);
    assert.equal(named.sends[0]?.socket, '/tmp/test-steward.sock');

    const { socket: _s, ...withoutSocket } = NETCONF;
    const dflt = fakeIO({ stdin: withoutSocket });
    await runShim(dflt.io);
    assert.equal(dflt.sends[0]?.socket, '/run/steward/stewardd.sock');
  });

  test('refuses a socket that is not a non-empty string with code 7', async () => {
    const { io, sends } = fakeIO({ stdin: { ...NETCONF, socket: '' } });
    cniErrorOut(await runShim(io), 7);
    assert.equal(sends.length, 0);
  });
});
