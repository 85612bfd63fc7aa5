// The spawner process: a small Node process forked by the daemon that starts delegate plugins.
// Node forks synchronously on its event loop, and fork's cost grows with the forking process's
// memory (spawn('/bin/true') from a Node process holding Buffers: 0.8 ms at 55 MiB, 3.7 ms at 154 MiB,
// 17.8 ms at 456 MiB; docs/performance.md): done in the daemon it would stall every request. Here it
// costs little and stalls nothing.
//
// No plugin outlives the daemon: when the daemon goes away (its IPC channel closes, which the
// kernel does when the daemon dies however it dies, or our parent pid changes, polled as a
// backstop), the spawner kills the process group of every plugin still running and exits. Linux's
// parent-death signal would do the same for the spawner itself but is not reachable from Node.
// Each plugin start is reported to the daemon (pid, start time, boot id) before its outcome, so
// the daemon can journal it and a later recovery can kill the group should the spawner die too.

import { describeProcess } from './process-group.js';
import { killRunningGroups, runProcess, type ProcessJob, type ProcessOutcome } from './process.js';
import { avoidExitHang } from '@cni-steward/shared';
import { getPriority } from 'node:os';
import { restoreBasePriority } from '../priority.js';
import { inMountNs, PLUGIN_MOUNT_NS_ENV } from './mount-ns.js';

avoidExitHang(); // it exits with the daemon: no compile job may hold that exit (shared/src/exit-hang.ts)

// Every plugin start forks this process, and fork's cost grows with its memory. On V8's defaults a
// spawner starting plugins back to back (a burst, a DEL storm, a spool drain) kept growing although it
// keeps almost nothing alive: 11 MiB anonymous at start, 137 MiB after 16,000 runs of a no-op plugin
// (docs/performance.md, "The spawner's memory"). Optimising for size turns V8's collection heuristics
// towards memory: 17-25 MiB over the same runs. Set at run time it acts through those heuristics (the
// semi-space cap the flag implies on a command line is fixed at start-up and does not follow), which
// test/integration/spawner-heap.test.ts holds, and whoever forks this file (stewardd, a test, the
// bench) gets it. After avoidExitHang, through getBuiltinModule as it does, so a preloaded hook sees
// both (test/fixtures/report-v8-flags.mjs, bench/fixtures/default-heap.mjs).
process.getBuiltinModule('node:v8').setFlagsFromString('--optimize-for-size');

// The plugins it starts are the node's work: they run at the priority stewardd was started with,
// not at stewardd's own (--nice, priority.ts), as the same plugins would without steward. Done
// before the message handler exists, so before any job. Where it cannot go back (a --nice above
// the starting value without CAP_SYS_NICE) its plugins run at stewardd's value, and it says why,
// through stewardd's own logger (log.ts, loaded only then) on the stderr it shares with stewardd.
const restore = restoreBasePriority();
if (restore?.error !== undefined) {
  const { createLogger } = await import('../log.js');
  const nice = getPriority();
  createLogger('warn', { write: (line: string) => void process.stderr.write(line) }).warn(
    { nice, base: restore.base, err: restore.error },
    `the plugin spawner cannot go back to nice ${restore.base} (lowering a nice value needs CAP_SYS_NICE): its plugins run at nice ${nice}, stewardd's --nice`,
  );
}

interface Request {
  id: number;
  job?: ProcessJob;
  ping?: true;
}

/** Where plugins run: stewardd's --plugin-mount-ns (plugins/mount-ns.ts), else this process's own. */
const mountNs = process.env[PLUGIN_MOUNT_NS_ENV];

/** How often the parent pid is checked, in case the IPC channel's close is missed. */
const PARENT_POLL_MS = 500;

function failed(e: unknown): ProcessOutcome {
  return {
    code: null,
    signal: null,
    stdout: '',
    stderr: '',
    timedOut: false,
    overflow: false,
    spawnError: String((e as Error)?.message ?? e),
  };
}

const parent = process.ppid;

function daemonGone(): never {
  killRunningGroups();
  process.exit(0);
}

process.on('message', (msg: Request) => {
  // A health check: answering at all proves the spawner's loop and IPC work.
  if (msg.ping || !msg.job) {
    process.send?.({ id: msg.id, pong: true });
    return;
  }
  // Whatever one job does, the spawner answers it and stays up for the others.
  runProcess(inMountNs(msg.job, mountNs), {
    onStart: (pid) => {
      const started = describeProcess(pid);
      if (started) process.send?.({ id: msg.id, started });
    },
  })
    .catch(failed)
    .then((outcome) => process.send?.({ id: msg.id, outcome }));
});
process.on('disconnect', daemonGone);
setInterval(() => {
  if (process.ppid !== parent) daemonGone();
}, PARENT_POLL_MS).unref();
