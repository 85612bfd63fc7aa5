// The daemon's side of the spawner process: jobs go over the IPC channel and outcomes come back.
// If the spawner dies, calls in flight fail with code 100 (their plugin's outcome is unknown, so
// the engine treats them like any failed step: rolled back or retried) and the next call forks a
// new one.

import { fork, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { CniError, ErrorCode } from '@cni-steward/shared';
import type { ProcessJob, ProcessOutcome } from './process.js';

const CHILD = new URL('./spawner-child.js', import.meta.url);

export class Spawner {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (o: ProcessOutcome) => void; reject: (e: Error) => void }>();

  constructor(private readonly log: Logger) {}

  run(job: ProcessJob): Promise<ProcessOutcome> {
    const child = this.ensure();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.hold(child);
      child.send({ id, job }, (err) => {
        if (!err) return;
        this.pending.delete(id);
        this.hold(child);
        reject(new CniError(ErrorCode.PluginExecFailed, `cannot hand plugin ${job.file} to the spawner: ${err.message}`));
      });
    });
  }

  close(): void {
    this.child?.disconnect();
    this.child = undefined;
  }

  private ensure(): ChildProcess {
    if (this.child?.connected) return this.child;
    const child = fork(CHILD, [], { execArgv: [], serialization: 'json', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (msg: { id: number; outcome: ProcessOutcome }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      this.hold(child);
      p.resolve(msg.outcome);
    });
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (this.pending.size === 0) return;
      this.log.error({ code, signal, inFlight: this.pending.size }, 'plugin spawner exited with plugins in flight');
      for (const p of this.pending.values()) {
        p.reject(new CniError(ErrorCode.PluginExecFailed, 'the plugin spawner exited while the plugin ran; its outcome is unknown'));
      }
      this.pending.clear();
    });
    this.child = child;
    return child;
  }

  /** The channel keeps the daemon alive only while a plugin runs (recovery runs before the server listens). */
  private hold(child: ChildProcess): void {
    const channel = child.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (this.pending.size > 0) { child.ref(); channel?.ref?.(); } else { child.unref(); channel?.unref?.(); }
  }
}
