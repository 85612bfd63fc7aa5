// `node --import tsx bench/tools/shim-variants.ts [rounds]` (root; after `npm run build`): what the
// Go shim spends, one factor at a time. Builds variants of the shim (shim/) and the floor program
// (bench/fixtures/go-floor) for this machine's CPU, then times each with hyperfine against
// `curl --unix-socket` sending the same request to the same daemon (a DEL answered from a tombstone,
// as bench/rows/shim.ts), rounds alternating; and the shipped build on one CPU and on two (taskset).
// Prints a Markdown table: bytes, median ms, median paired ratio to curl, CPU ms (hyperfine's
// user + system, mean).

import { execFileSync, spawnSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Scratch } from '../lib/scratch.js';
import { GO_BUILD_FLAGS, compileFor, hostTarget } from '../../scripts/build-shims.mjs';
import { BenchDaemon } from '../lib/daemon.js';
import { benchNetns, cniVars, noopConf, wireBody } from '../lib/netconf.js';
import { REPO } from '../lib/paths.js';
import { median, pairedRatio, round } from '../lib/stats.js';
import { alternate, q, type Cmd } from '../rows/shim.js';

interface Variant {
  name: string;
  what: string;
  flags?: string[];
  /** The source dir (default: the shim). */
  src?: string;
  /** Run under this prefix (taskset). */
  prefix?: string;
  env?: Record<string, string>;
}

const taskset = spawnSync('taskset', ['-c', '0,1', 'true']).status === 0;
const VARIANTS: Variant[] = [
  { name: 'shipped', what: `as shipped: ${GO_BUILD_FLAGS.join(' ')}, CGO_ENABLED=0` },
  { name: 'not-stripped', what: 'without -ldflags "-s -w" (symbols and DWARF kept)', flags: ['-trimpath'] },
  {
    name: 'gomaxprocs-env',
    what: 'as shipped, GOMAXPROCS=1 in the environment (the runtime starts with one P)',
    env: { GOMAXPROCS: '1' },
  },
  ...(taskset
    ? [
        { name: '1 cpu', what: 'as shipped, taskset -c 0', prefix: 'taskset -c 0' },
        { name: '2 cpus', what: 'as shipped, taskset -c 0,1', prefix: 'taskset -c 0,1' },
      ]
    : []),
  {
    name: 'floor: write',
    what: 'a Go program that writes `{}` and exits (bench/fixtures/go-floor), shipped flags',
    src: join(REPO, 'bench/fixtures/go-floor'),
  },
];

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 8);
  const env = new Scratch('shim-variants');
  benchNetns(env);
  const daemon = new BenchDaemon(env, 'variants');
  try {
    await daemon.start();
    const cid = 'variants-tombstone';
    const conf = noopConf(daemon.socket);
    await daemon.cni(wireBody('DEL', cid, conf));
    const netconf = join(env.dir, 'netconf.json');
    const body = join(env.dir, 'body.json');
    writeFileSync(netconf, JSON.stringify(conf));
    writeFileSync(body, wireBody('DEL', cid, conf));
    const runtimeEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...cniVars('DEL', cid) };

    const rows: Array<{ name: string; what: string; file: string; cmd: Cmd }> = [];
    for (const v of VARIANTS) {
      const file = compileFor(hostTarget(), join(env.dir, 'bin', v.name.replace(/\W+/g, '-')), v.flags, v.src);
      const line = `${v.prefix ? `${v.prefix} ` : ''}${q(file)} < ${q(netconf)}`;
      execFileSync('sh', ['-c', line], { env: { ...runtimeEnv, ...v.env }, stdio: 'ignore' });
      rows.push({ name: v.name, what: v.what, file, cmd: { name: v.name, line, env: { ...runtimeEnv, ...v.env } } });
    }
    const curl: Cmd = {
      name: 'curl',
      line:
        `curl -sS -f --unix-socket ${q(daemon.socket)} -H 'content-type: application/json' ` +
        `--data-binary @${q(body)} http://localhost/v1/cni`,
    };
    const loadBefore = loadavg()[0] ?? 0;
    const cpu = new Map<string, number[]>();
    const t = alternate(env, [curl, ...rows.map((r) => r.cmd)], rounds, 5, runtimeEnv, cpu);
    const curlMs = t.get('curl') ?? [];
    const out = [
      `bench/tools/shim-variants.ts ${rounds} (${rounds} rounds × 5 runs each, order alternating), ` +
        `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, load ${round(loadBefore)} before / ` +
        `${round(loadavg()[0] ?? 0)} after:`,
      '',
      '| variant | what | bytes | median ms | × curl (paired) | CPU ms |',
      '|---|---|--:|--:|--:|--:|',
      `| curl | \`curl --unix-socket\`, same request | — | ${round(median(curlMs))} | 1 | ${round(median(cpu.get('curl') ?? []))} |`,
    ];
    for (const r of rows) {
      const ms = t.get(r.name) ?? [];
      out.push(
        `| ${r.name} | ${r.what} | ${statSync(r.file).size.toLocaleString('en')} | ${round(median(ms))} | ` +
          `${round(pairedRatio(ms, curlMs))} | ${round(median(cpu.get(r.name) ?? []))} |`,
      );
    }
    console.log(out.join('\n'));
  } finally {
    await daemon.stop().catch(() => undefined);
    await env.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
