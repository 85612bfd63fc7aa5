// A/B of two trees' daemons under the same load: the direct bridge + host-local ADD+DEL, and the same
// pair sent over the socket (with the shim's hint headers) to a stewardd of the tree AB_BASE (built
// with npm run build) and to this checkout's, rotated per iteration, each in a fresh netns. Prints
// medians, paired ratios and overheads against the direct chain as JSON. For comparing a change
// while other work loads the machine (absolute figures move with the load; the pairing does not):
//   AB_BASE=/tmp/base-tree N=40 node --import tsx bench/tools/daemon-ab.ts
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, openSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { Scratch } from '../lib/scratch.js';
import { callEnv, execCni } from '../lib/exec.js';
import { bridgeHostLocal, cniVars, noopConf, stewardOver, wireBody } from '../lib/netconf.js';
import { daemonEnv } from '../lib/daemon.js';
import { BENCH_BIN, SYSTEM_CNI_BIN } from '../lib/paths.js';
import { hintHeaders } from '@cni-steward/shared';

if (!process.env.AB_BASE) throw new Error('set AB_BASE to the other tree (built)');
const env = new Scratch('side');
function post(
  socket: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) {
      h['content-type'] = 'application/json';
      h['content-length'] = Buffer.byteLength(body);
    }
    const req = request(
      { socketPath: socket, path, method: body === undefined ? 'GET' : 'POST', headers: h, agent: false },
      (res) => {
        const c: Buffer[] = [];
        res.on('data', (b) => c.push(b));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(c).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
async function startDaemon(name: string, exe: string) {
  const dir = join(env.dir, name);
  mkdirSync(join(dir, 'run'), { recursive: true });
  mkdirSync(join(dir, 'state'), { recursive: true });
  writeFileSync(join(dir, 'boot'), 'b\n');
  const socket = join(dir, 'run', 's.sock');
  const log = openSync(join(dir, 'log'), 'a');
  const p = spawn(
    process.execPath,
    [
      exe,
      'run',
      '--socket',
      socket,
      '--state-dir',
      join(dir, 'state'),
      '--boot-id-file',
      join(dir, 'boot'),
      '--bin-dir',
      SYSTEM_CNI_BIN,
      '--bin-dir',
      BENCH_BIN,
      '--log-level',
      'info',
    ],
    { stdio: ['ignore', log, log], env: daemonEnv() },
  );
  env.defer(() => {
    p.kill('SIGKILL');
  });
  for (let i = 0; i < 3000; i++) {
    if (existsSync(socket)) {
      try {
        if ((await post(socket, '/readyz')).status === 200) break;
      } catch {
        /* not listening yet */
      }
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return socket;
}
const sockets = {
  base: await startDaemon('base', join(process.env.AB_BASE ?? '', 'bin/stewardd')),
  new: await startDaemon('new', join(process.cwd(), 'bin/stewardd')),
};
// AB_NOOP=1: base against new only, with the no-op delegate in one netns (no bridge, no netns per
// iteration): what each daemon adds to a request, with far less scatter than the bridge chain.
if (process.env.AB_NOOP) {
  const ns = `stwside-noop-${process.pid}`;
  execFileSync('ip', ['netns', 'add', ns]);
  env.defer(() => execFileSync('ip', ['netns', 'del', ns]));
  const pair = async (socket: string, cid: string) => {
    const conf = noopConf(socket);
    const t0 = performance.now();
    for (const command of ['ADD', 'DEL']) {
      const e = {
        CNI_COMMAND: command,
        CNI_CONTAINERID: cid,
        CNI_NETNS: `/run/netns/${ns}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: BENCH_BIN,
      };
      const r = await post(socket, '/v1/cni', JSON.stringify({ env: e, config: conf }), hintHeaders(e, conf));
      if (r.status !== 200) throw new Error(r.text);
    }
    return performance.now() - t0;
  };
  const N = Number(process.env.N ?? 300);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = -20; i < N; i++) {
    const first = i % 2 === 0;
    const x = await pair(first ? sockets.base : sockets.new, `noop-${i}-x`);
    const y = await pair(first ? sockets.new : sockets.base, `noop-${i}-y`);
    if (i < 0) continue;
    a.push(first ? x : y);
    b.push(first ? y : x);
  }
  const med = (v: number[]) => [...v].sort((p, q) => p - q)[Math.floor(v.length / 2)]!;
  console.log(
    JSON.stringify({
      n: N,
      load: execFileSync('cat', ['/proc/loadavg']).toString().trim(),
      pairMs: { base: +med(a).toFixed(3), new: +med(b).toFixed(3) },
      newMinusBaseMs: +med(b.map((v, k) => v - a[k]!)).toFixed(3),
    }),
  );
  await env.close();
  process.exit(0);
}
const bridge = env.bridge();
const subnet = env.subnet();
const plugin = bridgeHostLocal(bridge, subnet, join(env.dir, 'ipam'));
const directConf = { cniVersion: '1.0.0', name: 'podnet', ...plugin };
const viaSocket = (socket: string) => async (cid: string, netns: string) => {
  const conf = stewardOver(socket, [plugin]);
  for (const command of ['ADD', 'DEL']) {
    const r = await post(
      socket,
      '/v1/cni',
      wireBody(command, cid, conf, netns),
      hintHeaders(cniVars(command, cid, netns), conf),
    );
    if (r.status !== 200) throw new Error(r.text);
  }
};
const modes: Record<string, (cid: string, ns: string) => Promise<void>> = {
  direct: async (cid, netns) => {
    const add = await execCni(join(SYSTEM_CNI_BIN, 'bridge'), callEnv('ADD', cid, netns), JSON.stringify(directConf));
    if (add.code !== 0) throw new Error(add.stdout);
    await execCni(
      join(SYSTEM_CNI_BIN, 'bridge'),
      callEnv('DEL', cid, netns),
      JSON.stringify({ ...directConf, prevResult: JSON.parse(add.stdout) }),
    );
  },
  base: viaSocket(sockets.base),
  new: viaSocket(sockets.new),
};
const names = Object.keys(modes);
const t: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
const N = Number(process.env.N ?? 30);
for (let i = -1; i < N; i++) {
  const order = names.map((_, k) => names[(k + i + 3) % names.length]!);
  for (const m of order) {
    const ns = `stwside-${m}-${i + 1}`;
    execFileSync('ip', ['netns', 'add', ns]);
    const t0 = performance.now();
    await modes[m]!(`side-${m}-${i + 1}`, `/run/netns/${ns}`);
    const ms = performance.now() - t0;
    execFileSync('ip', ['netns', 'del', ns]);
    if (i >= 0) t[m]!.push(ms);
  }
}
const med = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
};
const pr = (a: number[], b: number[]) => med(a.map((x, i) => x / b[i]!));
const pd = (a: number[], b: number[]) => med(a.map((x, i) => x - b[i]!));
console.log(
  JSON.stringify({
    n: N,
    load: execFileSync('cat', ['/proc/loadavg']).toString().trim(),
    median: Object.fromEntries(names.map((n) => [n, +med(t[n]!).toFixed(2)])),
    ratio: { base: +pr(t.base!, t.direct!).toFixed(3), new: +pr(t.new!, t.direct!).toFixed(3) },
    overheadMs: { base: +pd(t.base!, t.direct!).toFixed(2), new: +pd(t.new!, t.direct!).toFixed(2) },
    newMinusBaseMs: +pd(t.new!, t.base!).toFixed(2),
  }),
);
await env.close();
