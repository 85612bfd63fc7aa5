// Fuzzing the shipped shim (dist/steward, the single executable a node runs) as a process against
// a real stewardd with a real bridge + host-local delegate in real network namespaces: a seeded
// PRNG mutates the CNI_* environment (command, container id, netns, ifname, args, CNI_PATH and the
// shim's own PATH: hostile, huge, control characters, unicode, missing) and stdin (valid netconfs
// mutated, huge, deeply nested, wrong types, "__proto__" keys, garbage bytes).
//
// Asserts: every call exits 0 with valid output, or non-zero with a CNI error JSON whose code is a
// documented one (docs/errors.md; a delegate's own code is passed through, and the Debian plugins'
// generic failure is libcni's 999) and never 104 ("a bug in steward"); no call dies by a signal; the daemon stays up and /healthz is
// ok; after DELing every ADD that succeeded, no host-local lease, no interface in any netns and no
// attachment `added`/`adding` is left; nothing lands in the spool's rejected dir. Prints the
// outcome table by command and code.
//
// Bounded: FUZZ_CALLS calls (default 400, as in `npm test` / .ci/run) and FUZZ_SECONDS (default
// 420) of wall time, whichever ends first. FUZZ_SEED picks the sequence (default 1). Longer runs:
// `npm run fuzz` (FUZZ_CALLS=3000 by default).
//
// Safety: whatever is mutated, fields that would reach the host outside this test's sandbox are
// pinned back after mutation: the socket and spool dir, and for every plugin object its bridge
// name, IPAM (subnet, dataDir), isGateway/ipMasq; plugin types are limited to harmless ones or
// garbage; netns values are this test's namespaces or paths that are not network namespaces
// (never /proc/<pid>/ns/net, which would be the host's).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';

const CALLS = Number(process.env.FUZZ_CALLS ?? 400);
const SECONDS = Number(process.env.FUZZ_SECONDS ?? 420);
const SEED = Number(process.env.FUZZ_SEED ?? 1);
const SHIM_EXE = join(REPO, 'dist/steward');

/** docs/errors.md: the CNI spec's codes and steward's own. */
const DOCUMENTED = new Set([1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100, 101, 102, 103, 104, 105, 106]);
/** Passed through from the delegates (docs/errors.md: "a delegate's own CNI error (any code)"): libcni's ErrInternal. */
const DELEGATE_CODES = new Set([999]);

const env = new TestEnv('fuzz');
const daemon = new Daemon(env, { args: ['--retry-base-ms', '200', '--retry-max-ms', '1000', '--plugin-timeout', '20'] });
before(() => daemon.start());
after(() => env.close());

// ---- seeded PRNG (mulberry32)

function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  const chance = (p: number) => next() < p;
  return { next, int, pick, chance };
}
type Rng = ReturnType<typeof prng>;

const UNICODE = ['é', 'コンテナ', '🚀', '\u202e', '\u200b', 'Ω', '\ufeff', 'ß'];
const CONTROL = ['\x01', '\x1b[31m', '\n', '\r', '\t', '\x7f'];

function hostileString(r: Rng): string {
  switch (r.int(9)) {
    case 0: return '';
    case 1: return 'x'.repeat(r.pick([16, 64, 256, 4096, 100_000]));
    case 2: return `a${r.pick(CONTROL)}b`;
    case 3: return r.pick(UNICODE).repeat(r.int(20) + 1);
    case 4: return r.pick(['../../etc/passwd', '/', '.', '..', 'a/b', 'a b', '-rf', '$(id)', '`id`', '%s%n', 'null']);
    case 5: return String(r.int(1e9));
    case 6: return r.pick(['=', ';', '=;=;', 'K=V;K=V', 'a=b=c', ';;;', 'IgnoreUnknown=1;']);
    case 7: return Array.from({ length: r.int(30) + 1 }, () => String.fromCharCode(32 + r.int(95))).join('');
    default: return `${r.pick(UNICODE)}${r.pick(CONTROL)}${'y'.repeat(r.int(300))}`;
  }
}

function randomValue(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 6 : 9)) {
    case 0: return null;
    case 1: return r.chance(0.5);
    case 2: return r.pick([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, 65536]);
    case 3: return hostileString(r);
    case 4: return r.pick(['0.3.1', '1.0.0', '1.1.0', '9.9.9', '', 'v1', '1.0']);
    case 5: return 'steward';
    case 6: return Array.from({ length: r.int(4) }, () => randomValue(r, depth + 1));
    case 7: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(4); i > 0; i--) o[randomKey(r)] = randomValue(r, depth + 1);
      return o;
    }
    default: return JSON.parse(`{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},"fz":${JSON.stringify(hostileString(r))}}`);
  }
}

function randomKey(r: Rng): string {
  return r.pick(['fz', 'fzKey', `fz${r.pick(UNICODE)}`, '__proto__', 'constructor', 'prototype', 'name', 'cniVersion', 'type',
    'plugins', 'delegates', 'prevResult', 'runtimeConfig', 'capabilities', 'args', 'ifname', '']);
}

// ---- the netconf: a valid one, then mutated, then pinned

const SAFE_TYPES = ['bridge', 'loopback'];
const GARBAGE_TYPES = ['', 'nope-no-such-plugin', '../../bin/sh', '/bin/sh', 'a b', 'x'.repeat(300), 'bridge\n'];

interface Sandbox { socket: string; spoolDir: string; bridge: string; subnet: string; dataDir: string }

function validConf(r: Rng, s: Sandbox): Record<string, unknown> {
  const version = r.pick(['0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  const plugins: unknown[] = [bridgePlugin({ bridge: s.bridge, subnet: s.subnet, dataDir: s.dataDir })];
  if (r.chance(0.2)) plugins.unshift({ type: 'loopback' });
  return stewardConf(s.socket, version, [delegate(r.chance(0.9) ? 'fuzznet' : 'fuzznet2', version, plugins)]);
}

/** Replaces, deletes or adds one value somewhere in `root` (in place). */
function mutateOnce(r: Rng, root: unknown): unknown {
  const containers: Array<Record<string, unknown> | unknown[]> = [];
  const walk = (v: unknown, depth: number) => {
    if (depth > 8 || v === null || typeof v !== 'object') return;
    containers.push(v as Record<string, unknown> | unknown[]);
    for (const c of Object.values(v as object)) walk(c, depth + 1);
  };
  walk(root, 0);
  if (containers.length === 0 || r.chance(0.03)) return randomValue(r);
  const c = r.pick(containers);
  const keys = Array.isArray(c) ? c.map((_, i) => i) : Object.keys(c);
  const op = r.int(4);
  if (keys.length > 0 && op === 0) {
    const k = r.pick(keys as Array<string | number>);
    if (Array.isArray(c)) c.splice(k as number, 1);
    else delete c[k as string];
  } else if (keys.length > 0 && op === 1) {
    const k = r.pick(keys as Array<string | number>);
    (c as Record<string | number, unknown>)[k] = randomValue(r);
  } else if (keys.length > 0 && op === 2) {
    // Wrong type: wrap in an array, or turn into a string.
    const k = r.pick(keys as Array<string | number>);
    const v = (c as Record<string | number, unknown>)[k];
    (c as Record<string | number, unknown>)[k] = r.chance(0.5) ? [v] : JSON.stringify(v) ?? 'undefined';
  } else if (Array.isArray(c)) {
    c.push(randomValue(r));
  } else {
    Object.defineProperty(c, randomKey(r), { value: randomValue(r), enumerable: true, writable: true, configurable: true });
  }
  return root;
}

/** Puts back everything that could reach outside the sandbox. */
function pin(conf: unknown, s: Sandbox, r: Rng): unknown {
  if (conf === null || typeof conf !== 'object' || Array.isArray(conf)) return conf;
  const c = conf as Record<string, unknown>;
  c.socket = s.socket;
  c.spoolDir = s.spoolDir;
  const pinPlugin = (p: unknown) => {
    if (p === null || typeof p !== 'object' || Array.isArray(p)) return;
    const o = p as Record<string, unknown>;
    if (typeof o.type === 'string' && !SAFE_TYPES.includes(o.type) && !GARBAGE_TYPES.includes(o.type)) o.type = r.pick([...SAFE_TYPES, ...GARBAGE_TYPES]);
    o.bridge = s.bridge;
    o.isGateway = true;
    o.ipMasq = false;
    o.ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: s.subnet }]], routes: [{ dst: '0.0.0.0/0' }] };
    for (const k of ['isDefaultGateway', 'macspoofchk', 'vlan', 'vlanTrunk', 'mtu', 'promiscMode', 'enabledad']) delete o[k];
  };
  const pinList = (l: unknown) => {
    if (!Array.isArray(l)) return;
    for (const d of l) {
      if (d === null || typeof d !== 'object' || Array.isArray(d)) continue;
      const dd = d as Record<string, unknown>;
      if (Array.isArray(dd.plugins)) for (const p of dd.plugins) pinPlugin(p);
      else pinPlugin(dd);
    }
  };
  pinList(c.delegates);
  pinList(c.plugins);
  return c;
}

type Stdin = { kind: string; text: string | Buffer };

function makeStdin(r: Rng, s: Sandbox, clean: boolean): Stdin {
  const roll = clean ? r.next() * 0.75 : r.next();
  if (roll < 0.35) return { kind: 'valid', text: JSON.stringify(validConf(r, s)) };
  if (roll < 0.75) {
    let conf: unknown = validConf(r, s);
    for (let i = r.int(4) + 1; i > 0; i--) conf = mutateOnce(r, conf);
    return { kind: 'mutated', text: JSON.stringify(pin(conf, s, r)) ?? 'null' };
  }
  if (roll < 0.8) {
    const conf = validConf(r, s);
    conf.fzPad = 'p'.repeat(r.pick([900 * 1024, 1024 * 1024 + 10]));
    return { kind: 'huge', text: JSON.stringify(conf) };
  }
  if (roll < 0.85) {
    const depth = r.pick([1000, 10_000, 100_000]);
    const text = r.chance(0.5) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    return { kind: 'deep', text: r.chance(0.5) ? text : JSON.stringify(validConf(r, s)).replace(/\}$/, `,"fzDeep":${text}}`) };
  }
  switch (r.int(8)) {
    case 0: return { kind: 'garbage', text: '' };
    case 1: return { kind: 'garbage', text: r.pick(['null', '[]', '"str"', '123', 'true', '{', '{"a":}', '\ufeff{}']) };
    case 2: return { kind: 'garbage', text: Buffer.from(Array.from({ length: r.int(2000) + 1 }, () => r.int(256))) };
    case 3: return { kind: 'garbage', text: Buffer.from([0xff, 0xfe, 0x7b, 0x7d]) };
    case 4: return { kind: 'garbage', text: JSON.stringify(validConf(r, s)).slice(0, r.int(200)) };
    case 5: return { kind: 'garbage', text: `${JSON.stringify(validConf(r, s))}${JSON.stringify(validConf(r, s))}` };
    case 6: return { kind: 'garbage', text: JSON.stringify(validConf(r, s)).replace('"cniVersion"', '"cniVersion":"1.0.0","cniVersion"') };
    default: return { kind: 'garbage', text: hostileString(r) };
  }
}

// ---- the environment

const CIDS = ['fz-0', 'fz-1', 'fz-2', 'fz-3', 'fz-4', 'fz-5'];

function makeEnv(r: Rng, netnses: string[], clean: boolean): Record<string, string> {
  const e: Record<string, string> = {};
  const maybe = (name: string, good: () => string, pBad: number) => {
    if (!clean && r.chance(pBad)) {
      if (r.chance(0.25)) return; // missing
      e[name] = hostileString(r);
    } else {
      e[name] = good();
    }
  };
  maybe('CNI_COMMAND', () => r.pick(['ADD', 'ADD', 'ADD', 'ADD', 'DEL', 'DEL', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC']), 0.1);
  maybe('CNI_CONTAINERID', () => r.pick(CIDS), 0.2);
  maybe('CNI_NETNS', () => r.pick(netnses), 0.15);
  if (!clean && e.CNI_NETNS === undefined && r.chance(0.5)) e.CNI_NETNS = r.pick(['/etc/passwd', '/dev/null', '/nonexistent/netns', 'relative/ns', '/run/netns']);
  maybe('CNI_IFNAME', () => r.pick(['eth0', 'eth0', 'eth0', 'net1']), 0.15);
  if (r.chance(0.5)) maybe('CNI_ARGS', () => r.pick(['IgnoreUnknown=1;K8S_POD_NAMESPACE=fz;K8S_POD_NAME=p', 'IgnoreUnknown=1']), 0.5);
  maybe('CNI_PATH', () => '/usr/lib/cni', 0.3);
  if (!clean && e.CNI_PATH !== undefined && r.chance(0.2)) e.CNI_PATH = `relative-dir:${e.CNI_PATH}:/nonexistent`;
  e.PATH = clean || r.chance(0.9) ? (process.env.PATH ?? '/usr/bin:/bin') : r.pick(['', '/nonexistent', 'relative', hostileString(r)]);
  // execve cannot carry NUL; the kernel caps one string at 128 KiB.
  for (const [k, v] of Object.entries(e)) e[k] = v.replaceAll('\0', '0');
  return e;
}

// ---- running the shim

interface Outcome { exit: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }

function runShim(envVars: Record<string, string>, stdin: string | Buffer): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(SHIM_EXE, [], { env: envVars, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', (exit, signal) => {
      clearTimeout(timer);
      resolve({ exit, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.end(stdin);
  });
}

/** Why `o` breaks the shim's contract, or undefined. */
function violation(command: string | undefined, o: Outcome): string | undefined {
  if (o.signal) return `killed by ${o.signal}`;
  if (o.exit === 0) {
    if (o.stdout.trim() === '') return command === 'ADD' || command === 'VERSION' ? `${command} succeeded with empty output` : undefined;
    try {
      const j = JSON.parse(o.stdout) as Record<string, unknown>;
      if (typeof j.cniVersion !== 'string') return 'success output without cniVersion';
      return undefined;
    } catch {
      return 'success with invalid JSON on stdout';
    }
  }
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(o.stdout) as Record<string, unknown>;
  } catch {
    return `exit ${o.exit} without a CNI error JSON on stdout`;
  }
  if (typeof j.code !== 'number' || typeof j.msg !== 'string') return 'error JSON without numeric code and string msg';
  if (!DOCUMENTED.has(j.code) && !DELEGATE_CODES.has(j.code)) return `undocumented code ${j.code}`;
  return undefined;
}

describe(`fuzzing dist/steward: ${CALLS} calls, seed ${SEED}`, () => {
  it('every call answers by the contract; the daemon stays healthy; nothing is left after DELing every successful ADD', { timeout: (SECONDS + 600) * 1000 }, async () => {
    assert.ok(existsSync(SHIM_EXE), `${SHIM_EXE} is missing: npm run build`);
    const r = prng(SEED);
    const s: Sandbox = {
      socket: daemon.socket, spoolDir: daemon.spoolDir, bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam'),
    };
    const netnses = [env.netns(), env.netns(), env.netns()];
    const table = new Map<string, number>();
    const count = (k: string) => table.set(k, (table.get(k) ?? 0) + 1);
    /** The first message seen for each (command, code), printed in the table. */
    const example = new Map<string, string>();
    const violations: string[] = [];
    /** Code 104 is "a bug in steward" and 100 a delegate that failed without a CNI error: printed with their input. */
    const notable: string[] = [];
    const added = new Map<string, { env: Record<string, string>; stdin: string | Buffer }>();
    const deadline = Date.now() + SECONDS * 1000;
    let calls = 0;
    for (; calls < CALLS && Date.now() < deadline; calls++) {
      // Two calls in five are well-formed CNI calls (some with a mutated netconf), so ADDs succeed,
      // conflict, are CHECKed and DELed; the rest are hostile.
      const clean = r.chance(0.4);
      const envVars = makeEnv(r, netnses, clean);
      const stdin = makeStdin(r, s, clean);
      const o = await runShim(envVars, stdin.text);
      const cmd = envVars.CNI_COMMAND;
      const label = ['ADD', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC'].includes(cmd ?? '') ? cmd! : 'other';
      let code = 'ok';
      if (o.exit !== 0) {
        try { code = String((JSON.parse(o.stdout) as { code: unknown }).code); } catch { code = 'no-json'; }
      }
      count(`${label}\t${code}`);
      if (code !== 'ok' && !example.has(`${label}\t${code}`)) {
        try { example.set(`${label}\t${code}`, String((JSON.parse(o.stdout) as { msg: unknown }).msg).slice(0, 110)); } catch { /* counted as a violation */ }
      }
      if (code === '104' || code === '100') {
        notable.push(`#${calls} ${label} ${code}: ${o.stdout.slice(0, 500)} env=${JSON.stringify(envVars).slice(0, 300)} stdin(${stdin.kind})=${String(stdin.text).slice(0, 300)}`);
      }
      const bad = violation(cmd, o);
      if (bad) {
        violations.push(`#${calls} ${bad}: env=${JSON.stringify(envVars).slice(0, 400)} stdin(${stdin.kind})=` +
          `${String(stdin.text).slice(0, 200)} stdout=${o.stdout.slice(0, 300)} stderr=${o.stderr.slice(0, 300)}`);
      }
      if (cmd === 'ADD' && o.exit === 0) {
        added.set(`${envVars.CNI_CONTAINERID}\0${envVars.CNI_IFNAME}\0${envVars.CNI_NETNS}\0${calls}`, { env: envVars, stdin: stdin.text });
      }
      if (calls % 25 === 24) {
        assert.equal(daemon.proc?.exitCode, null, `stewardd exited during the fuzz (call ${calls}); see ${daemon.logFile}`);
        const h = await daemon.get('/healthz');
        assert.equal(h.status, 200, `call ${calls}: /healthz ${h.text}`);
      }
    }

    // The outcome table.
    const rows = [...table.entries()].sort(([a], [b]) => a.localeCompare(b));
    const line = (a: string, b: string, c: string) => `${a.padEnd(9)} ${b.padStart(5)} ${c.padStart(6)}`;
    process.stderr.write(`\nfuzz: ${calls} calls (seed ${SEED}), ${added.size} successful ADDs\n${line('command', 'code', 'calls')}\n` +
      `${rows.map(([k, v]) => { const [c, code] = k.split('\t'); return `${line(c!, code!, String(v))}  ${JSON.stringify(example.get(k) ?? '')}`; }).join('\n')}\n\n`);
    if (notable.length > 0) process.stderr.write(`fuzz: calls answered 100 or 104:\n${notable.join('\n')}\n\n`);
    assert.deepEqual(violations, [], `${violations.length} contract violations`);
    assert.deepEqual(notable.filter((n) => / 104: /.test(n)), [], 'code 104 is "a bug in steward" (docs/errors.md)');
    assert.equal(daemon.proc?.exitCode, null, 'stewardd died');
    assert.equal((await daemon.get('/healthz')).status, 200);

    // DEL every ADD that succeeded, as the runtime would, with the same environment and netconf.
    for (const { env: e, stdin } of added.values()) {
      const o = await runShim({ ...e, CNI_COMMAND: 'DEL' }, stdin);
      assert.equal(o.exit, 0, `DEL after fuzz failed: ${o.stdout}`);
    }
    // Nothing left that was added, nor being added; interfaces and leases gone.
    await daemon.waitFor('no attachment added/adding', async () => {
      const live = [...(await daemon.get('/v1/attachments?state=added')).json, ...(await daemon.get('/v1/attachments?state=adding')).json];
      return live.length === 0;
    }, 60_000);
    const leftLeases = existsSync(s.dataDir)
      ? readdirSync(s.dataDir).flatMap((net) => readdirSync(join(s.dataDir, net))
        .filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip')).map((f) => `${net}/${f}`))
      : [];
    const teardowns = (await daemon.get('/v1/teardowns')).json;
    assert.deepEqual(leftLeases, [], `leases left; pending teardowns: ${JSON.stringify(teardowns).slice(0, 2000)}`);
    for (const ns of netnses) {
      const links = JSON.parse(sh('ip', ['-n', ns.split('/').pop()!, '-j', 'link', 'show'])) as Array<{ ifname: string }>;
      assert.deepEqual(links.map((l) => l.ifname), ['lo'], `interfaces left in ${ns}`);
    }
    const rejected = join(daemon.spoolDir, 'rejected');
    assert.deepEqual(existsSync(rejected) ? readdirSync(rejected) : [], [], 'files in spool/rejected');
    assert.equal((await daemon.get('/healthz')).status, 200);
  });
});
