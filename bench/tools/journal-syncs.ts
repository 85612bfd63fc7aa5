// Counts the journal's fsyncs per ADD and per DEL: stewardd of a tree (argument, default this
// checkout; built) runs under `strace -f -e trace=fsync,fdatasync`, and N ADDs then N DELs of the
// no-op delegate are sent over its socket with the shim's hint headers, for a chain of 1 plugin
// and one of 3 plugins. The fsyncs of each phase are the trace's lines written during it. Root and
// strace needed. Prints JSON: fsyncs per ADD and per DEL, per chain length.
//   node --import tsx bench/tools/journal-syncs.ts [TREE] [N]
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { hintHeaders } from '@cni-steward/shared';
import { Scratch } from '../lib/scratch.js';
import { benchNetns, cniVars, noopConf } from '../lib/netconf.js';
import { daemonEnv } from '../lib/daemon.js';
import { BENCH_BIN } from '../lib/paths.js';

const tree = resolve(process.argv[2] ?? process.cwd());
const N = Number(process.argv[3] ?? 20);
const env = new Scratch('syncs');

function post(socket: string, path: string, body?: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; text: string }>((ok, fail) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined)
      Object.assign(h, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    const req = request(
      { socketPath: socket, path, method: body === undefined ? 'GET' : 'POST', headers: h, agent: false },
      (res) => {
        const c: Buffer[] = [];
        res.on('data', (b: Buffer) => c.push(b));
        res.on('end', () => ok({ status: res.statusCode ?? 0, text: Buffer.concat(c).toString() }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

async function main(): Promise<void> {
  benchNetns(env);
  const dir = join(env.dir, 'd');
  mkdirSync(join(dir, 'state'), { recursive: true });
  writeFileSync(join(dir, 'boot'), 'b\n');
  const socket = join(dir, 's.sock');
  const trace = join(dir, 'trace');
  const log = openSync(join(dir, 'log'), 'a');
  const p = spawn(
    'strace',
    ['-f', '-e', 'trace=fsync,fdatasync', '-o', trace, process.execPath, join(tree, 'bin/stewardd'), 'run']
      .concat(['--socket', socket, '--state-dir', join(dir, 'state'), '--boot-id-file', join(dir, 'boot')])
      .concat(['--bin-dir', BENCH_BIN, '--log-level', 'warn']),
    { stdio: ['ignore', log, log], env: daemonEnv() },
  );
  env.defer(() => void p.kill('SIGINT'));
  for (let i = 0; i < 3000; i++) {
    if (existsSync(socket) && (await post(socket, '/readyz').catch(() => ({ status: 0 }))).status === 200) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const count = async () => {
    await new Promise((r) => setTimeout(r, 300));
    return readFileSync(trace, 'utf8')
      .split('\n')
      .filter((l) => /\b(fsync|fdatasync)\(/.test(l)).length;
  };
  const out: Record<string, unknown> = { tree, n: N };
  for (const plugins of [1, 3]) {
    const one = noopConf(socket);
    const delegates = one.delegates as Array<{ plugins: unknown[] }>;
    const plugin = delegates[0]!.plugins[0];
    delegates[0]!.plugins = Array.from({ length: plugins }, () => plugin);
    const send = async (command: string, cid: string) => {
      const e = cniVars(command, cid);
      const r = await post(socket, '/v1/cni', JSON.stringify({ env: e, config: one }), hintHeaders(e, one));
      if (r.status !== 200) throw new Error(`${command}: ${r.text}`);
    };
    const c0 = await count();
    for (let i = 0; i < N; i++) await send('ADD', `syncs-${plugins}-${i}`);
    const c1 = await count();
    for (let i = 0; i < N; i++) await send('DEL', `syncs-${plugins}-${i}`);
    const c2 = await count();
    out[`plugins${plugins}`] = { fsyncsPerAdd: (c1 - c0) / N, fsyncsPerDel: (c2 - c1) / N };
  }
  out.load = readFileSync('/proc/loadavg', 'utf8').trim();
  console.log(JSON.stringify(out));
}

main()
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => env.close().then(() => execFileSync('true')));
