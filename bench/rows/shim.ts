// Benchmark 1: one shim call (exec -> stdin -> socket -> answer -> exit) against curl sending the
// very same HTTP request to the very same daemon. The request is a DEL answered from a tombstone:
// the attachment was DELed once (a pass-through to the no-op delegate), so every timed DEL runs
// no plugin and the figure is the shim and the daemon's request path alone.
//
// Timing is hyperfine (shell `sh`, its start-up calibrated and subtracted), in rounds of a few runs
// per command whose order alternates round by round; the ratio is the median of per-pair ratios.
//
// In the same rounds, the floor of any Go shim, built here with the shipped binary's flags: a
// program that writes `{}` and exits (the Go runtime's own start, bench/fixtures/go-floor); and the
// shipped shim pinned to one CPU and to two with taskset (the Go runtime's start-up grows with the
// CPUs it sees: containerd #10897; the shim sets GOMAXPROCS to 1 first thing).

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { cniVars, noopConf, wireBody } from '../lib/netconf.js';
import { ensureFreshShims, shimBinaries, shimExecutable } from '../lib/paths.js';
import { buildGoFixture } from '../lib/go-fixtures.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, pairedRatio, p99, round } from '../lib/stats.js';

export const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export interface Cmd {
  name: string;
  line: string;
  env?: NodeJS.ProcessEnv;
}

/** Runs hyperfine on `cmds` for `rounds` rounds, alternating their order; returns ms per run. */
export function alternate(
  env: Scratch,
  cmds: Cmd[],
  rounds: number,
  runs: number,
  baseEnv: NodeJS.ProcessEnv,
  /** When given: per command and round, hyperfine's mean user + system CPU ms per run. */
  cpu?: Map<string, number[]>,
): Map<string, number[]> {
  const out = new Map<string, number[]>(cmds.map((c) => [c.name, []]));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? cmds : [...cmds].reverse();
    for (const c of order) {
      // One hyperfine per command and round keeps each command's own environment.
      const file = join(env.dir, 'hyperfine.json');
      execFileSync(
        'hyperfine',
        ['--shell', 'sh', '--style', 'none', '--warmup', '1', '--runs', String(runs), '--export-json', file, c.line],
        { env: c.env ?? baseEnv, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      const result = (
        JSON.parse(readFileSync(file, 'utf8')) as { results: Array<{ times: number[]; user: number; system: number }> }
      ).results[0];
      out.get(c.name)?.push(...(result?.times ?? []).map((t) => t * 1000));
      if (cpu && result) cpu.set(c.name, [...(cpu.get(c.name) ?? []), (result.user + result.system) * 1000]);
    }
  }
  return out;
}

/** Peak RSS (MiB) of one execution, by GNU time. */
function peakMiB(file: string, args: string[], stdinFile: string, env: NodeJS.ProcessEnv): number {
  const res = spawnSync('/usr/bin/time', ['-f', '%M', file, ...args], {
    env,
    input: readFileSync(stdinFile),
    encoding: 'utf8',
  });
  const lines = res.stderr.trim().split('\n');
  return Number(lines[lines.length - 1]) / 1024;
}

export async function benchShim(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  // The binaries for every node (dist/shims): the x64 one is timed, all are sized.
  ensureFreshShims(ctx.log);
  const shim = shimExecutable();
  const daemon = new BenchDaemon(env, 'shim');
  await daemon.start();
  try {
    const cid = 'bench-shim-tombstone';
    const conf = noopConf(daemon.socket);
    // The first DEL of an unknown attachment passes through once and writes the tombstone.
    await daemon.cni(wireBody('DEL', cid, conf));
    const netconfFile = join(env.dir, 'shim-netconf.json');
    const bodyFile = join(env.dir, 'shim-body.json');
    writeFileSync(netconfFile, JSON.stringify(conf));
    writeFileSync(bodyFile, wireBody('DEL', cid, conf));

    // What a runtime gives a plugin: PATH and the CNI variables (libcni adds its own environment,
    // which on these machines would include NODE_EXTRA_CA_CERTS: measured separately below).
    const runtimeEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...cniVars('DEL', cid) };
    const shimLine = `${q(shim.path)} < ${q(netconfFile)}`;
    const curlLine =
      `curl -sS -f --unix-socket ${q(daemon.socket)} -H 'content-type: application/json' ` +
      `--data-binary @${q(bodyFile)} http://localhost/v1/cni`;
    // Sanity: both succeed with the same (empty) answer before anything is timed.
    for (const line of [shimLine, curlLine]) execFileSync('sh', ['-c', line], { env: runtimeEnv, stdio: 'ignore' });

    const cmds: Cmd[] = [
      { name: 'shim', line: shimLine },
      { name: 'curl', line: curlLine },
    ];
    // The floor, built for this machine's CPU with the shipped flags.
    const goWrite = buildGoFixture('go-floor', join(env.dir, 'go-floor', 'write'));
    const goWriteLine = `${q(goWrite)} < ${q(netconfFile)}`;
    execFileSync('sh', ['-c', goWriteLine], { env: runtimeEnv, stdio: 'ignore' });
    cmds.push({ name: 'goWrite', line: goWriteLine });
    // The same call pinned to one CPU and to two (taskset, util-linux), when there are two.
    if (spawnSync('taskset', ['-c', '0,1', 'true']).status === 0) {
      cmds.push(
        { name: 'shim1cpu', line: `taskset -c 0 ${shimLine}` },
        { name: 'shim2cpu', line: `taskset -c 0,1 ${shimLine}` },
      );
    }
    ctx.log(`shim: ${shim.kind}`);
    // CPU per run (hyperfine's user + system): steadier than wall time on a loaded machine.
    const cpu = new Map<string, number[]>();
    const t = alternate(env, cmds, n(10, ctx, 2), 5, runtimeEnv, cpu);
    const shimMs = t.get('shim') ?? [];
    const curlMs = t.get('curl') ?? [];

    const mem = { shim: [] as number[], curl: [] as number[] };
    for (let i = 0; i < 3; i++) {
      mem.shim.push(peakMiB(shim.path, [], netconfFile, runtimeEnv));
      mem.curl.push(
        peakMiB(
          'curl',
          [
            '-sS',
            '-f',
            '--unix-socket',
            daemon.socket,
            '-H',
            'content-type: application/json',
            '--data-binary',
            `@${bodyFile}`,
            'http://localhost/v1/cni',
          ],
          bodyFile,
          runtimeEnv,
        ),
      );
    }
    const ratio = pairedRatio(shimMs, curlMs);
    const extra: Record<string, number | string> = {
      shimExecutable: shim.kind,
      shimPeakMiB: round(median(mem.shim), 1),
      curlPeakMiB: round(median(mem.curl), 1),
      shimP99Ms: round(p99(shimMs)),
      curlP99Ms: round(p99(curlMs)),
      shimCpuMs: round(median(cpu.get('shim') ?? [])),
      curlCpuMs: round(median(cpu.get('curl') ?? [])),
      goWriteCpuMs: round(median(cpu.get('goWrite') ?? [])),
    };
    for (const name of ['shim1cpu', 'shim2cpu']) {
      const c = cpu.get(name);
      if (c && c.length > 0) extra[`${name}CpuMs`] = round(median(c));
    }
    for (const bin of shimBinaries()) {
      const file = spawnSync('file', ['-b', bin], { encoding: 'utf8' }).stdout ?? '';
      extra[`bytes ${bin.split('/').pop()}`] = statSync(bin).size;
      extra[`file ${bin.split('/').pop()}`] =
        file.split(',').slice(0, 2).join(',').trim() +
        (/interpreter (\S+)/.exec(file) ? `, ${/interpreter (\S+?),?\s/.exec(file)?.[1] ?? ''}` : '');
    }
    // The image that carries them, when one was built here (npm run build:image): its size in the same run.
    // Only asked when podman's default storage exists: on a machine without one, `podman image inspect`
    // creates /var/lib/containers/storage, which the bench then left behind.
    const image = process.env.STEWARD_IMAGE ?? 'cni-steward:0.1.0';
    if (existsSync('/var/lib/containers/storage')) {
      const inspect = spawnSync('podman', ['image', 'inspect', '--format', '{{.Size}}', image], { encoding: 'utf8' });
      if (inspect.status === 0) extra[`bytes image ${image}`] = Number(inspect.stdout.trim());
    }
    const info: Array<[string, string]> = [
      ['goWrite', 'goWriteMs'],
      ['shim1cpu', 'shimOn1CpuMs'],
      ['shim2cpu', 'shimOn2CpusMs'],
    ];
    for (const [name, key] of info) {
      const ms = t.get(name);
      if (ms && ms.length > 0) extra[key] = round(median(ms));
    }
    const ratios: Array<[string, string]> = [['goWrite', 'goWriteRatio']];
    for (const [name, key] of ratios) {
      const ms = t.get(name);
      if (ms && ms.length > 0) extra[key] = round(pairedRatio(ms, curlMs));
    }
    return [
      {
        id: 'shim-call',
        title: 'one shim call (DEL answered from a tombstone, no plugin run)',
        unit: 'ms',
        candidate: { label: shim.kind, median: round(median(shimMs)), n: shimMs.length },
        floor: { label: 'curl --unix-socket, same request', median: round(median(curlMs)), n: curlMs.length },
        ratio: round(ratio),
        target: '<= 0.5x curl',
        met: ratio <= 0.5,
        extra,
        notes: [
          'goWrite: a Go program that writes {} and exits (bench/fixtures/go-floor), built with the shipped flags, in the same rounds (the floor of any Go shim); shim1cpu/shim2cpu: the same shim call under taskset -c 0 / -c 0,1',
          '*CpuMs: user + system CPU per run (hyperfine, median over the rounds), steadier than wall time when the machine is loaded',
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
