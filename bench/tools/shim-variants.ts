// `node --import tsx bench/tools/shim-variants.ts [rounds]` (root; after `npm run build`): what the
// Bun-compiled shim spends, one factor at a time. Builds variants of the shim bundle
// (shim/dist/steward-bun.mjs) and the floor programs for the shipped x64 target, then times each
// with hyperfine against `curl --unix-socket` sending the same request to the same daemon (a DEL
// answered from a tombstone, as bench/shim.ts), rounds alternating. Prints a Markdown table:
// bytes, median ms, median paired ratio to curl, CPU ms (hyperfine's user + system, mean).
// The figures of docs/performance.md "The shim call" come from this.

import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Scratch } from '../lib/scratch.js';
import { COMPILE_FLAGS, compileFor } from '../../scripts/build-shims.mjs';
import { BenchDaemon } from '../lib/daemon.js';
import { benchNetns, cniVars, noopConf, wireBody } from '../lib/netconf.js';
import { REPO } from '../lib/paths.js';
import { median, pairedRatio, round } from '../lib/stats.js';
import { alternate, q, type Cmd } from '../shim.js';

interface Variant {
  name: string;
  what: string;
  /** The bundle's text -> the variant's entry text (undefined: the bundle as built). */
  edit?: (src: string) => string;
  flags?: string[];
  env?: Record<string, string>;
}

const without = (flag: string) => COMPILE_FLAGS.filter((f) => f !== flag);
const mustReplace = (src: string, from: string, to: string) => {
  if (!src.includes(from)) throw new Error(`bundle has no ${JSON.stringify(from)}: update the variant`);
  return src.replace(from, to);
};
const TLA = 'var out = await runShim(';

const VARIANTS: Variant[] = [
  { name: 'shipped', what: `as shipped: ${COMPILE_FLAGS.filter((f) => !f.startsWith('--no-compile')).join(' ')}` },
  { name: 'no-bytecode', what: 'without --bytecode', flags: without('--bytecode') },
  { name: 'no-minify', what: 'without --minify', flags: without('--minify') },
  {
    name: 'cjs',
    what: '--format=cjs (top-level await made a .then)',
    flags: [...without('--format=esm'), '--format=cjs'],
    edit: (s) => {
      const i = s.indexOf(TLA);
      if (i < 0) throw new Error('bundle has no top-level await to rewrite');
      const tail = s.slice(i + TLA.length);
      const close = tail.indexOf('});');
      return `${s.slice(0, i)}runShim(${tail.slice(0, close)}}).then((out) => {${tail.slice(close + 3)}\n});\n`;
    },
  },
  {
    name: 'smol',
    what: '--compile-exec-argv=--smol (smaller heap)',
    flags: [...COMPILE_FLAGS, '--compile-exec-argv=--smol'],
  },
  {
    name: 'jit-late',
    what: '--compile-jit-policy=1000 (later JIT tier-up)',
    flags: [...COMPILE_FLAGS, '--compile-jit-policy=1000'],
  },
  {
    name: 'process.stdout',
    what: 'answer written with process.stdout.write (before this change)',
    edit: (s) => mustReplace(s, 'writeAll(Buffer.from(out.stdout, "utf8"));', 'process.stdout.write(out.stdout);'),
  },
  {
    name: 'node:crypto',
    what: 'node:crypto imported at start (before this change)',
    edit: (s) => `import { randomBytes as __rb } from "node:crypto";\nglobalThis.__rb = __rb;\n${s}`,
  },
  {
    name: 'before',
    what: 'both of the above (the shim before this change)',
    edit: (s) =>
      `import { randomBytes as __rb } from "node:crypto";\nglobalThis.__rb = __rb;\n${mustReplace(s, 'writeAll(Buffer.from(out.stdout, "utf8"));', 'process.stdout.write(out.stdout);')}`,
  },
  {
    name: 'ca',
    what: 'as shipped, NODE_EXTRA_CA_CERTS set (a runtime passes its environment on)',
    env: process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS } : {},
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

    const bundle = readFileSync(join(REPO, 'shim/dist/steward-bun.mjs'), 'utf8');
    const rows: Array<{ name: string; what: string; file: string; cmd: Cmd }> = [];
    for (const v of VARIANTS) {
      const entry = join(env.dir, `${v.name}.mjs`);
      writeFileSync(entry, v.edit ? v.edit(bundle) : bundle);
      const file = compileFor('linux-x64', entry, join(env.dir, 'bin', v.name), v.flags);
      const line = `${q(file)} < ${q(netconf)}`;
      execFileSync('sh', ['-c', line], { env: { ...runtimeEnv, ...v.env }, stdio: 'ignore' });
      rows.push({ name: v.name, what: v.what, file, cmd: { name: v.name, line, env: { ...runtimeEnv, ...v.env } } });
    }
    const floors: Array<[string, string, string]> = [
      ['floor: empty', 'a program with no code (`0;`): the runtime starts and exits', ''],
      ['floor: write', 'a program that writes `{}` with writeSync and exits', ''],
      ['floor: fetch', 'a program that makes the same POST with fetch({unix}) and writes the answer', ''],
      ['floor: stdout', 'a program that writes `{}` with process.stdout.write and exits', ''],
    ];
    const floorSrc = (n: string) => join(REPO, 'bench/fixtures/bun-floor', `${n}.mjs`);
    const stdoutEntry = join(env.dir, 'stdout.mjs');
    writeFileSync(stdoutEntry, "process.stdout.write('{}');\n");
    const emptyEntry = join(env.dir, 'empty.mjs');
    writeFileSync(emptyEntry, '0;\n');
    for (const [name, what] of floors) {
      const src = name.endsWith('write')
        ? floorSrc('write')
        : name.endsWith('fetch')
          ? floorSrc('fetch')
          : name.endsWith('empty')
            ? emptyEntry
            : stdoutEntry;
      const file = compileFor('linux-x64', src, join(env.dir, 'bin', name.replace(/\W+/g, '-')));
      const line = name.endsWith('fetch')
        ? `${q(file)} ${q(daemon.socket)} ${q(body)} < ${q(netconf)}`
        : `${q(file)} < ${q(netconf)}`;
      rows.push({ name, what, file, cmd: { name, line } });
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
        `${round(loadavg()[0] ?? 0)} after, node ${process.version}:`,
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
