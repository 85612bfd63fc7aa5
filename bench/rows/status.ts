// Benchmark: the steady cost of CNI STATUS. containerd 2.0.1+ executes the plugin for STATUS every
// 5 s on every node, forever; CRI-O every 500 ms while it starts up. The CPU one STATUS exec costs
// the node (the shipped shim's user + system CPU plus the daemon's own CPU per STATUS, from
// /proc/<pid>/stat) is set against the same for one exec of a Go CNI plugin (Debian's bridge,
// CNI_COMMAND=VERSION) as the yardstick, in blocks that alternate so both see the same machine; then
// per hour at the two periods (issue 23). In the same blocks: the shim's own VERSION exec against
// bridge's (issue 29: <= 1.2x its CPU), and the shim's structural floor, a Go program that writes {}
// and exits, built with the shipped flags (what any Go shim pays before its first line runs).
// Every timed program is started by a Go process (bench/fixtures/exec-runner) as containerd and
// CRI-O start a plugin, each exec's CPU its wait4 rusage: a child of the bench's Node process pays
// for the copy of that big process's pages it touches before its exec, which no runtime's child does
// (until 2 Dec 2026 they were started from here; the same two execs started that way are kept
// beside them as *NodeForked figures).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { execCni } from '../lib/exec.js';
import { execRunner, GoExec } from '../lib/exec-runner.js';
import { BenchDaemon, daemonEnv } from '../lib/daemon.js';
import { bridgeHostLocal, cniVars } from '../lib/netconf.js';
import { CLK_TCK } from '../lib/other-cpu.js';
import { SYSTEM_CNI_BIN, shimExecutable } from '../lib/paths.js';
import { buildGoFixture } from '../lib/go-fixtures.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, round } from '../lib/stats.js';

/** containerd's CNI STATUS period and CRI-O's start-up poll, in seconds. */
const CONTAINERD_PERIOD_S = 5;
const CRIO_PERIOD_S = 0.5;
const BLOCK = 20;

/** This process's reaped children's user + system CPU (cutime + cstime), in ms. */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[13]) + Number(f[14])) * 1000) / CLK_TCK;
}

/** Percent of one core that one exec of `cpuMs` every `periodS` seconds costs. */
const coreShare = (cpuMs: number, periodS: number) => (cpuMs / (periodS * 1000)) * 100;
/** CPU seconds per hour of one exec of `cpuMs` every `periodS` seconds. */
const perHourS = (cpuMs: number, periodS: number) => (cpuMs * (3600 / periodS)) / 1000;

export async function benchStatus(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const shim = shimExecutable();
  const daemon = new BenchDaemon(env, 'status');
  await daemon.start();
  try {
    const baseEnv = { PATH: daemonEnv().PATH ?? '/usr/bin:/bin' };
    // A node's netconf: steward at 1.1 (STATUS needs it) over bridge + host-local.
    const conf = {
      cniVersion: '1.1.0',
      name: 'steward',
      type: 'steward',
      socket: daemon.socket,
      delegates: [
        {
          cniVersion: '1.0.0',
          name: 'podnet',
          plugins: [bridgeHostLocal('stw-status0', '10.251.0.0/24', join(env.dir, 'status-ipam'))],
        },
      ],
    };
    const statusEnv = { ...baseEnv, CNI_COMMAND: 'STATUS', CNI_PATH: SYSTEM_CNI_BIN };
    const stdin = JSON.stringify(conf);
    const bridge = join(SYSTEM_CNI_BIN, 'bridge');
    const versionEnv = { ...baseEnv, ...cniVars('VERSION', ''), CNI_COMMAND: 'VERSION' };
    const versionStdin = JSON.stringify({ cniVersion: '1.0.0', name: 'podnet', type: 'bridge' });

    const runner = new GoExec(env, execRunner(env));
    /** One exec from the Go runner: its CPU and wall time; throws unless it exits 0. */
    const goRun = async (what: string, file: string, e: Record<string, string>, input: string) => {
      const r = await runner.run(file, e, input);
      if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}${r.error ? `: ${r.error}` : ''}): ${r.stdout}`);
      return r;
    };
    const status = () => goRun('STATUS through the shim', shim.path, statusEnv, stdin);
    const version = () => goRun('bridge VERSION', bridge, versionEnv, versionStdin);
    const shimVersion = () => goRun('shim VERSION', shim.path, versionEnv, versionStdin);
    // Its own name: the shim row's build of the same program is under go-floor/ in the same scratch dir.
    const floorBin = buildGoFixture('go-floor', join(env.dir, 'go-floor', 'status'));
    const floor = () => goRun('the Go floor program', floorBin, baseEnv, '');
    // The same STATUS and bridge execs started from this Node process, as the row did until 2 Dec 2026.
    const nodeForked = async (what: string, file: string, e: Record<string, string>, input: string) => {
      const r = await execCni(file, e, input);
      if (r.code !== 0) throw new Error(`${what} (started from Node) failed (exit ${r.code}): ${r.stdout}`);
    };
    for (let i = 0; i < 5; i++) {
      await status();
      await version();
      await shimVersion();
      await floor();
    }

    const blocks = n(10, ctx, 2);
    const wall = { s: [] as number[], v: [] as number[] };
    const cpu = { shim: 0, daemon: 0, daemonIdle: 0, go: 0, shimVersion: 0, goFloor: 0, shimNode: 0, goNode: 0 };
    /** Runs `one` BLOCK times; the CPU its execs used, summed. */
    const block = async (one: () => Promise<{ cpuMs: number; ms: number }>, walls?: number[]) => {
      let sum = 0;
      for (let i = 0; i < BLOCK; i++) {
        const r = await one();
        sum += r.cpuMs;
        walls?.push(r.ms);
      }
      return sum;
    };
    for (let b = 0; b < blocks; b++) {
      let d0 = daemon.cpu().self;
      cpu.shim += await block(status, wall.s);
      cpu.daemon += daemon.cpu().self - d0;
      d0 = daemon.cpu().self;
      cpu.go += await block(version, wall.v);
      // What the daemon burns with no request (timers, GC): the baseline its STATUS CPU stands on.
      cpu.daemonIdle += daemon.cpu().self - d0;
      cpu.shimVersion += await block(shimVersion);
      cpu.goFloor += await block(floor);
      let c0 = childrenCpuMs();
      for (let i = 0; i < BLOCK; i++) await nodeForked('STATUS through the shim', shim.path, statusEnv, stdin);
      cpu.shimNode += childrenCpuMs() - c0;
      c0 = childrenCpuMs();
      for (let i = 0; i < BLOCK; i++) await nodeForked('bridge VERSION', bridge, versionEnv, versionStdin);
      cpu.goNode += childrenCpuMs() - c0;
    }
    runner.close();
    const execs = blocks * BLOCK;
    const shimMs = cpu.shim / execs;
    const daemonMs = cpu.daemon / execs;
    const goMs = cpu.go / execs;
    const shimVersionMs = cpu.shimVersion / execs;
    const goFloorMs = cpu.goFloor / execs;
    const totalMs = shimMs + daemonMs;
    const ratio = totalMs / goMs;
    const share5 = coreShare(totalMs, CONTAINERD_PERIOD_S);
    ctx.log(
      `STATUS: shim ${round(shimMs)} + daemon ${round(daemonMs)} ms CPU per exec; bridge VERSION ${round(goMs)} ms`,
    );
    return [
      {
        id: 'status',
        title:
          'CPU per CNI STATUS exec through the shipped shim (shim + stewardd) vs one Go CNI plugin exec (bridge VERSION)',
        unit: 'ms CPU',
        candidate: {
          label: 'STATUS through the shim: the shim process + the daemon, user + system CPU per exec',
          median: round(totalMs),
          n: execs,
        },
        floor: {
          label: "Debian's /usr/lib/cni/bridge with CNI_COMMAND=VERSION, user + system CPU per exec",
          median: round(goMs),
          n: execs,
        },
        ratio: round(ratio),
        ratioOf: 'CPU',
        target: '<= 1.5x, and <= 0.1 % of one core at a 5 s period',
        met: ratio <= 1.5 && share5 <= 0.1,
        extra: {
          shimCpuMsPerExec: round(shimMs),
          daemonCpuMsPerStatus: round(daemonMs),
          daemonIdleCpuMsPerGoExec: round(cpu.daemonIdle / execs),
          goCpuMsPerExec: round(goMs),
          shimCpuMsPerExecNodeForked: round(cpu.shimNode / execs),
          goCpuMsPerExecNodeForked: round(cpu.goNode / execs),
          shimVersionCpuMsPerExec: round(shimVersionMs),
          shimVersionOverGo: round(shimVersionMs / goMs),
          goFloorCpuMsPerExec: round(goFloorMs),
          goFloorOverGo: round(goFloorMs / goMs),
          coreSharePctAt5s: round(share5, 3),
          cpuSecondsPerHourAt5s: round(perHourS(totalMs, CONTAINERD_PERIOD_S)),
          goCpuSecondsPerHourAt5s: round(perHourS(goMs, CONTAINERD_PERIOD_S)),
          coreSharePctAt500ms: round(coreShare(totalMs, CRIO_PERIOD_S), 3),
          cpuSecondsPerHourAt500ms: round(perHourS(totalMs, CRIO_PERIOD_S)),
          statusWallMsP50: round(median(wall.s)),
          goVersionWallMsP50: round(median(wall.v)),
        },
        notes: [
          `shim: ${shim.kind}; every timed exec started by a Go process as containerd starts a plugin (bench/fixtures/exec-runner), its CPU the rusage wait4 reports for it, over ${blocks} alternating blocks of ${BLOCK} execs each; the daemon's from /proc/<pid>/stat (its spawner included) over the STATUS blocks, daemonIdleCpuMsPerGoExec what it burnt meanwhile in the bridge blocks with no request; wall times from the Go runner`,
          `*NodeForked: the shim's STATUS and bridge's VERSION started from the bench's Node process in blocks of their own (this process's reaped children's cutime + cstime, ${CLK_TCK} Hz ticks), as the row measured until 2 Dec 2026: such a child pays for the Node process's pages it touches before its exec`,
          `shimVersionCpuMsPerExec: the shim answering VERSION (the same stdin as bridge's), in the same alternating blocks; shimVersionOverGo its multiple of bridge's (target <= 1.2x). goFloorCpuMsPerExec: bench/fixtures/go-floor (a Go program that writes {} and exits), built with the shipped flags: what any Go shim costs before it reads its stdin`,
          `per hour: containerd 2.x's ${CONTAINERD_PERIOD_S} s STATUS period (720 execs/hour) and CRI-O's ${CRIO_PERIOD_S * 1000} ms start-up poll (7200 execs/hour); delegates at cniVersion 1.0.0, as Debian's plugins, so the daemon answers STATUS without executing them`,
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
