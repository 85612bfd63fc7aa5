// Input generators for test/integration/fuzz.test.ts: valid steward netconfs (bridge + host-local)
// and their mutations, the CNI_* environment (the PRNG and the hostile strings and values are
// fuzz-values.ts). Every netconf is "pinned" after mutation so nothing it makes can reach outside
// the test's sandbox (see the top of fuzz.test.ts).

import { hostileString, randomKey, randomValue, type Rng } from './fuzz-values.js';
import { bridgePlugin, delegate, stewardConf } from './netconf.js';

// ---- the netconf: a valid one, then mutated, then pinned

const SAFE_TYPES = ['bridge', 'loopback'];
const GARBAGE_TYPES = ['', 'nope-no-such-plugin', '../../bin/sh', '/bin/sh', 'a b', 'x'.repeat(300), 'bridge\n'];

export interface Sandbox {
  socket: string;
  spoolDir: string;
  bridge: string;
  subnet: string;
  dataDir: string;
}

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
    (c as Record<string | number, unknown>)[k] = r.chance(0.5) ? [v] : (JSON.stringify(v) ?? 'undefined');
  } else if (Array.isArray(c)) {
    c.push(randomValue(r));
  } else {
    Object.defineProperty(c, randomKey(r), {
      value: randomValue(r),
      enumerable: true,
      writable: true,
      configurable: true,
    });
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
    if (typeof o.type === 'string' && !SAFE_TYPES.includes(o.type) && !GARBAGE_TYPES.includes(o.type))
      o.type = r.pick([...SAFE_TYPES, ...GARBAGE_TYPES]);
    o.bridge = s.bridge;
    o.isGateway = true;
    o.ipMasq = false;
    o.ipam = {
      type: 'host-local',
      dataDir: s.dataDir,
      ranges: [[{ subnet: s.subnet }]],
      routes: [{ dst: '0.0.0.0/0' }],
    };
    for (const k of ['isDefaultGateway', 'macspoofchk', 'vlan', 'vlanTrunk', 'mtu', 'promiscMode', 'enabledad'])
      delete o[k];
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

export type Stdin = { kind: string; text: string | Buffer };

/**
 * stdin for one call: valid, mutated, huge, deeply nested or garbage; always sandboxed (below).
 */
export function makeStdin(r: Rng, s: Sandbox, clean: boolean): Stdin {
  const raw = rawStdin(r, s, clean);
  return { kind: raw.kind, text: sandboxStdin(raw.text, s, r) };
}

/**
 * Whatever the generator made, if the shim could read it as a netconf object, that object names
 * this test's socket and spool dir: without them the shim falls back to /run/steward/stewardd.sock
 * and /var/lib/steward/spool, the machine's own (a bare `{"a":{"a":…}}` once spooled a DEL there).
 * The keys are put first by text (JSON.stringify cannot re-encode a 100,000-deep value), then the
 * result is parsed to check that no later duplicate key overrides them; if one does, a valid
 * netconf is sent instead.
 */
export function sandboxStdin(text: string | Buffer, s: Sandbox, r: Rng): string | Buffer {
  const str = Buffer.isBuffer(text) ? text.toString('utf8') : text;
  const safe = (v: unknown) => isSandboxed(v, s);
  let v: unknown;
  try {
    v = JSON.parse(str.replace(/^\ufeff/, ''));
  } catch {
    return text; // not JSON: the shim refuses it (code 6) before it looks at a socket
  }
  if (safe(v)) return text;
  const at = str.indexOf('{') + 1;
  const empty = /^\s*\}/.test(str.slice(at));
  const patched = `${str.slice(0, at)}"socket":${JSON.stringify(s.socket)},"spoolDir":${JSON.stringify(s.spoolDir)}${empty ? '' : ','}${str.slice(at)}`;
  try {
    if (safe(JSON.parse(patched.replace(/^\ufeff/, '')))) return patched;
  } catch {
    /* fall through */
  }
  return JSON.stringify(validConf(r, s));
}

/** Whether a decoded stdin is harmless to the machine: not an object, or one naming the sandbox's socket and spool dir. */
export function isSandboxed(v: unknown, s: Sandbox): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return true;
  const o = v as Record<string, unknown>;
  return o.socket === s.socket && o.spoolDir === s.spoolDir;
}

function rawStdin(r: Rng, s: Sandbox, clean: boolean): Stdin {
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
    const text = r.chance(0.5)
      ? `${'['.repeat(depth)}${']'.repeat(depth)}`
      : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    return {
      kind: 'deep',
      text: r.chance(0.5) ? text : JSON.stringify(validConf(r, s)).replace(/\}$/, `,"fzDeep":${text}}`),
    };
  }
  switch (r.int(8)) {
    case 0:
      return { kind: 'garbage', text: '' };
    case 1:
      return { kind: 'garbage', text: r.pick(['null', '[]', '"str"', '123', 'true', '{', '{"a":}', '\ufeff{}']) };
    case 2:
      return { kind: 'garbage', text: Buffer.from(Array.from({ length: r.int(2000) + 1 }, () => r.int(256))) };
    case 3:
      return { kind: 'garbage', text: Buffer.from([0xff, 0xfe, 0x7b, 0x7d]) };
    case 4:
      return { kind: 'garbage', text: JSON.stringify(validConf(r, s)).slice(0, r.int(200)) };
    case 5:
      return { kind: 'garbage', text: `${JSON.stringify(validConf(r, s))}${JSON.stringify(validConf(r, s))}` };
    case 6:
      return {
        kind: 'garbage',
        text: JSON.stringify(validConf(r, s)).replace('"cniVersion"', '"cniVersion":"1.0.0","cniVersion"'),
      };
    default:
      return { kind: 'garbage', text: hostileString(r) };
  }
}

// ---- the environment

const CIDS = ['fz-0', 'fz-1', 'fz-2', 'fz-3', 'fz-4', 'fz-5'];

export function makeEnv(r: Rng, netnses: string[], clean: boolean): Record<string, string> {
  const e: Record<string, string> = {};
  const maybe = (name: string, good: () => string, pBad: number) => {
    if (!clean && r.chance(pBad)) {
      if (r.chance(0.25)) return; // missing
      e[name] = hostileString(r);
    } else {
      e[name] = good();
    }
  };
  maybe(
    'CNI_COMMAND',
    () => r.pick(['ADD', 'ADD', 'ADD', 'ADD', 'DEL', 'DEL', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC']),
    0.1,
  );
  maybe('CNI_CONTAINERID', () => r.pick(CIDS), 0.2);
  maybe('CNI_NETNS', () => r.pick(netnses), 0.15);
  if (!clean && e.CNI_NETNS === undefined && r.chance(0.5))
    e.CNI_NETNS = r.pick(['/etc/passwd', '/dev/null', '/nonexistent/netns', 'relative/ns', '/run/netns']);
  maybe('CNI_IFNAME', () => r.pick(['eth0', 'eth0', 'eth0', 'net1']), 0.15);
  if (r.chance(0.5))
    maybe('CNI_ARGS', () => r.pick(['IgnoreUnknown=1;K8S_POD_NAMESPACE=fz;K8S_POD_NAME=p', 'IgnoreUnknown=1']), 0.5);
  maybe('CNI_PATH', () => '/usr/lib/cni', 0.3);
  if (!clean && e.CNI_PATH !== undefined && r.chance(0.2)) e.CNI_PATH = `relative-dir:${e.CNI_PATH}:/nonexistent`;
  e.PATH =
    clean || r.chance(0.9)
      ? (process.env.PATH ?? '/usr/bin:/bin')
      : r.pick(['', '/nonexistent', 'relative', hostileString(r)]);
  // execve cannot carry NUL; the kernel caps one string at 128 KiB.
  for (const [k, v] of Object.entries(e)) e[k] = v.replaceAll('\0', '0');
  return e;
}
