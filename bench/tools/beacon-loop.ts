// What the alive beacon costs stewardd's event loop per beat (lifecycle/alive-beacon.ts): the shipped
// writer (the thread pool does the files) against the same beat written in place on the loop (unlink,
// write, rename: how it was written until 29 Nov 2026), in a directory of the file system given
// (default: a fresh one under /tmp, which is the root's ext4 on these machines, not tmpfs). Both ways
// are timed alone, then beside LOADERS child processes that each replace a file by rename and fsync it
// in a loop on the same file system (journal commits, as a burst's mounts, netns and fsyncs make
// them), in passes alternating ABBA. Per way: loopMsPerBeat, the loop's busy time per beat
// (performance.eventLoopUtilization()'s active time over the beats, the timers and the pool's
// callbacks included: the figure to compare), and call*, how long the beat's call held the loop
// (in place: the whole beat, I/O included; the pool: only asking for it). Prints JSON.
//   node --import tsx bench/tools/beacon-loop.ts [DIR] [BEATS]
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { AliveBeacon } from '../../daemon/src/lifecycle/alive-beacon.js';
import { mean, p99, round } from '../lib/stats.js';

const dir = mkdtempSync(join(process.argv[2] ?? '/tmp', 'beacon-loop-'));
const BEATS = Number(process.argv[3] ?? 400);
const PERIOD_MS = 5;
const quiet = { warn() {}, info() {} };

/** The beat as it was written before: every file operation on the loop. */
function inPlaceBeat(path: string): void {
  const tmp = `${path}.tmp`;
  rmSync(tmp, { force: true });
  writeFileSync(tmp, JSON.stringify({ at: Date.now(), pid: process.pid, ready: true, status: {} }), {
    mode: 0o600,
    flag: 'wx',
  });
  renameSync(tmp, path);
}

const LOADERS = 3;

/** LOADERS writers that each write, fsync and rename a file over another on the same file system, until killed. */
function fsyncLoad() {
  const children = Array.from({ length: LOADERS }, (_, n) => {
    const base = JSON.stringify(join(dir, `load-${n}`));
    return spawn(
      process.execPath,
      [
        '-e',
        `const fs=require('fs');const b=Buffer.alloc(4096,1);` +
          `for(;;){const fd=fs.openSync(${base}+'.tmp','w');fs.writeSync(fd,b);fs.fsyncSync(fd);fs.closeSync(fd);` +
          `fs.renameSync(${base}+'.tmp',${base});}`,
      ],
      { stdio: 'ignore' },
    );
  });
  return () => children.forEach((c) => c.kill('SIGKILL'));
}

interface Timing {
  loopMsPerBeat: number;
  callMeanMs: number;
  callP99Ms: number;
  callMaxMs: number;
}

/** One pass of `beats` beats one way: the loop's active ms and each beat call's ms. */
async function pass(way: 'pool' | 'in place', beats: number): Promise<{ activeMs: number; calls: number[] }> {
  const socket = join(dir, `${way === 'pool' ? 'p' : 'i'}.sock`);
  const beacon = new AliveBeacon(socket, () => true, quiet, 60_000);
  await beacon.start();
  const calls: number[] = [];
  const e0 = performance.eventLoopUtilization();
  for (let i = 0; i < beats; i++) {
    const t = performance.now();
    if (way === 'pool') {
      const written = beacon.beat();
      calls.push(performance.now() - t);
      await written;
    } else {
      inPlaceBeat(`${socket}.alive`);
      calls.push(performance.now() - t);
    }
    await sleep(PERIOD_MS);
  }
  const activeMs = performance.eventLoopUtilization(e0).active;
  await beacon.stop();
  return { activeMs, calls };
}

function timing(passes: Array<{ activeMs: number; calls: number[] }>): Timing {
  const calls = passes.flatMap((p) => p.calls);
  return {
    loopMsPerBeat: round(passes.reduce((a, p) => a + p.activeMs, 0) / calls.length, 3),
    callMeanMs: round(mean(calls), 3),
    callP99Ms: round(p99(calls), 3),
    callMaxMs: round(Math.max(...calls), 3),
  };
}

// Four passes a condition, in place and pool alternating (ABBA), BEATS / 4 beats each.
const out: Record<string, unknown> = { dir, beats: BEATS, periodMs: PERIOD_MS, loaders: LOADERS };
try {
  for (const load of [false, true]) {
    const stop = load ? fsyncLoad() : undefined;
    if (load) await sleep(500);
    const runs: Record<'in place' | 'pool', Array<{ activeMs: number; calls: number[] }>> = {
      'in place': [],
      pool: [],
    };
    for (const way of ['in place', 'pool', 'pool', 'in place'] as const) runs[way].push(await pass(way, BEATS / 4));
    stop?.();
    out[load ? 'besideRenamesAndFsyncs' : 'alone'] = { inPlace: timing(runs['in place']), pool: timing(runs.pool) };
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 2));
