// What the alive beacon costs stewardd's event loop per beat (lifecycle/alive-beacon.ts): the shipped
// writer (the thread pool does the files) against the same beat written in place on the loop (unlink,
// write, rename: how it was written until 29 Nov 2026), in a directory of the file system given
// (default: a fresh one under /tmp, which is the root's ext4 on these machines, not tmpfs). Each way
// is timed alone, then beside LOADERS child processes that each replace a file by rename and fsync it
// in a loop on the same file system (journal commits, as a burst's mounts, netns and fsyncs make
// them). Per way: the loop's busy time per beat (performance.eventLoopUtilization()'s active time over
// the beats, the timers' own included) and the time the loop is held by the beat's synchronous part
// (mean, p99, max). Prints JSON.
//   node --import tsx bench/tools/beacon-loop.ts [DIR] [BEATS]
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AliveBeacon } from '../../daemon/src/lifecycle/alive-beacon.js';

const dir = mkdtempSync(join(process.argv[2] ?? '/tmp', 'beacon-loop-'));
const BEATS = Number(process.argv[3] ?? 400);
const PERIOD_MS = 5;
const quiet = { warn() {}, info() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  heldMeanMs: number;
  heldP99Ms: number;
  heldMaxMs: number;
}

async function timeBeats(way: 'pool' | 'in place'): Promise<Timing> {
  const socket = join(dir, `${way === 'pool' ? 'p' : 'i'}.sock`);
  const beacon = new AliveBeacon(socket, () => true, quiet, 60_000);
  await beacon.start();
  const held: number[] = [];
  const e0 = performance.eventLoopUtilization();
  for (let i = 0; i < BEATS; i++) {
    const t = performance.now();
    if (way === 'pool') {
      const written = beacon.beat();
      held.push(performance.now() - t);
      await written;
    } else {
      inPlaceBeat(`${socket}.alive`);
      held.push(performance.now() - t);
    }
    await sleep(PERIOD_MS);
  }
  const e = performance.eventLoopUtilization(e0);
  beacon.stop();
  held.sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return {
    loopMsPerBeat: r(e.active / BEATS),
    heldMeanMs: r(held.reduce((a, b) => a + b, 0) / held.length),
    heldP99Ms: r(held[Math.floor(held.length * 0.99)]!),
    heldMaxMs: r(held[held.length - 1]!),
  };
}

const out: Record<string, unknown> = { dir, beats: BEATS, periodMs: PERIOD_MS, loaders: LOADERS };
try {
  for (const load of [false, true]) {
    const stop = load ? fsyncLoad() : undefined;
    if (load) await sleep(200);
    const inPlace = await timeBeats('in place');
    const pool = await timeBeats('pool');
    stop?.();
    out[load ? 'besideRenamesAndFsyncs' : 'alone'] = { inPlace, pool };
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 2));
