// The spawner process: a small Node process forked by the daemon that starts delegate plugins.
// Node forks synchronously on its event loop, and fork's cost grows with the forking process's
// memory (about 2 ms at 50 MiB, 14 ms at 160 MiB here): done in the daemon it would stall every
// request. Here it costs little and stalls nothing. It exits when the daemon goes away; plugins
// already running finish on their own (each is its own process group), as they would anyway.

import { runProcess, type ProcessJob, type ProcessOutcome } from './process.js';

interface Request {
  id: number;
  job?: ProcessJob;
  ping?: true;
}

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

process.on('message', (msg: Request) => {
  // A health check: answering at all proves the spawner's loop and IPC work.
  if (msg.ping || !msg.job) {
    process.send?.({ id: msg.id, pong: true });
    return;
  }
  // Whatever one job does, the spawner answers it and stays up for the others.
  runProcess(msg.job)
    .catch(failed)
    .then((outcome) => process.send?.({ id: msg.id, outcome }));
});
process.on('disconnect', () => process.exit(0));
