// The daemon's side of the spawner process: jobs go over the IPC channel and outcomes come back.
// If a spawner dies, the process groups of the plugins it had running are killed (they would run
// on under init with no deadline) and waited for; only then do those calls fail with code 100
// (their plugin's outcome is unknown, so the engine treats them like any failed step: rolled back
// or retried, never while the plugin still runs) and the next call forks a new one. Each spawner
// has its own table of calls, so one dying never fails another's.

import { fork, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { context, ROOT_CONTEXT } from '@opentelemetry/api';
import { CniError, ErrorCode } from '@cni-steward/shared';
import type { ProcessJob, ProcessOutcome } from './process.js';
import { stopGroups, type PluginProcess } from './process-group.js';

const CHILD = new URL('./spawner-child.js', import.meta.url);

/** Beyond the plugin's own deadline, how long to wait for the spawner's answer before giving up on it. */
const ANSWER_GRACE_MS = 10_000;

/**
 * How long a health ping waits for the spawner's answer (an idle spawner answers in about a
 * millisecond). /healthz tries twice, the second time with a new spawner.
 */
const HEALTH_PING_MS = 2000;
/**
 * A spawner forked moments ago is still starting Node (about 0.1 s idle, seconds on a loaded node):
 * its ping may take this long. One that cannot start at all exits, which fails the ping at once.
 */
const BOOT_GRACE_MS = 10_000;

/** What a health ping resolves with (the spawner answered; no plugin ran). */
const PONG: ProcessOutcome = { code: 0, signal: null, stdout: '', stderr: '', timedOut: false, overflow: false };

interface Call {
  resolve: (o: ProcessOutcome) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  /** The plugin's process, once the spawner reported it started. */
  process?: PluginProcess;
  onStart?: ((p: PluginProcess) => void) | undefined;
}

interface Worker {
  child: ChildProcess;
  calls: Map<number, Call>;
  /** When it was forked: a spawner still starting Node gets BOOT_GRACE_MS to answer a ping. */
  forkedAt: number;
}

export class Spawner {
  private current: Worker | undefined;
  private nextId = 1;

  constructor(private readonly log: Logger) {}

  /** Runs a job; `onStart` is told the plugin's process as soon as it exists (to journal it). */
  run(job: ProcessJob, onStart?: (p: PluginProcess) => void): Promise<ProcessOutcome> {
    const w = this.ensure();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!w.calls.delete(id)) return;
        this.hold(w);
        reject(
          new CniError(
            ErrorCode.PluginTimeout,
            `no answer from the plugin spawner for ${job.file} within ${job.timeoutMs + ANSWER_GRACE_MS} ms`,
          ),
        );
      }, job.timeoutMs + ANSWER_GRACE_MS);
      w.calls.set(id, { resolve, reject, timer, onStart });
      this.hold(w);
      w.child.send({ id, job }, (err) => {
        if (!err) return;
        this.retire(w);
        this.finish(
          w,
          id,
          undefined,
          new CniError(ErrorCode.PluginExecFailed, `cannot hand plugin ${job.file} to the spawner: ${err.message}`),
        );
      });
    });
  }

  /**
   * Forks the spawner now rather than at the first plugin call, which would otherwise wait for a
   * Node start (0.1 s idle, seconds on a loaded node). A failure here is retried by that call.
   */
  warm(): void {
    try {
      this.hold(this.ensure());
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'cannot fork the plugin spawner yet; the first plugin call retries');
    }
  }

  /**
   * Whether a spawner answers: the current one, or a new one forked in its place. Undefined when
   * healthy; otherwise why not, after a second fork also failed to answer (the spawner is dead
   * and cannot be restarted, e.g. it exits as soon as it starts).
   */
  async health(timeoutMs = HEALTH_PING_MS): Promise<string | undefined> {
    let why: string | undefined;
    for (let attempt = 1; attempt <= 2; attempt++) {
      why = await this.ping(timeoutMs);
      if (why === undefined) return undefined;
    }
    return `the plugin spawner is dead and could not be restarted: ${why}`;
  }

  private ping(timeoutMs: number): Promise<string | undefined> {
    let w: Worker;
    try {
      w = this.ensure();
    } catch (e) {
      return Promise.resolve(`cannot fork a plugin spawner: ${(e as Error).message}`);
    }
    const id = this.nextId++;
    const wait = Math.max(timeoutMs, w.forkedAt + BOOT_GRACE_MS - Date.now());
    return new Promise((resolve) => {
      // After stewardd's own loop was blocked past `wait` (a slow synced commit), this timer runs
      // before an answer already sent is read: look once more after that (setImmediate runs after
      // the loop's I/O), so a spawner that answered, and its plugins, are not killed.
      const timer = setTimeout(
        () =>
          setImmediate(() => {
            if (!w.calls.delete(id)) return;
            this.hold(w);
            // Its event loop is stuck (an idle one answers in about a millisecond): replace it.
            this.retire(w);
            resolve(`no answer from the plugin spawner (pid ${w.child.pid ?? '?'}) within ${wait} ms`);
          }),
        wait,
      );
      w.calls.set(id, { resolve: () => resolve(undefined), reject: (e) => resolve(e.message), timer });
      this.hold(w);
      w.child.send({ id, ping: true }, (err) => {
        if (!err) return;
        this.retire(w);
        this.finish(w, id, undefined, new Error(`cannot reach the plugin spawner: ${err.message}`));
      });
    });
  }

  /**
   * Stops using a spawner whose channel failed (EPIPE: it died, and its exit is not processed yet)
   * or that stopped answering: the next call forks a new one. Calls in flight on it fail when it exits.
   */
  private retire(w: Worker): void {
    if (this.current === w) this.current = undefined;
    if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }

  close(): void {
    if (this.current?.child.connected) this.current.child.disconnect();
    this.current = undefined;
  }

  private started(w: Worker, id: number, p: PluginProcess): void {
    const call = w.calls.get(id);
    if (!call) return;
    call.process = p;
    try {
      call.onStart?.(p);
    } catch (e) {
      this.log.error({ err: (e as Error).message, pid: p.pid }, 'cannot record a plugin process');
    }
  }

  private finish(w: Worker, id: number, outcome: ProcessOutcome | undefined, error?: Error): void {
    const call = w.calls.get(id);
    if (!call) return;
    w.calls.delete(id);
    clearTimeout(call.timer);
    this.hold(w);
    if (outcome) call.resolve(outcome);
    else call.reject(error ?? new Error('spawner call failed'));
  }

  private ensure(): Worker {
    if (this.current?.child.connected) return this.current;
    // Forked in the root trace context: its channel's events (a plugin started, its outcome) would
    // otherwise all run in the context of the request that happened to fork it (tracing/).
    const child = context.with(ROOT_CONTEXT, () =>
      fork(CHILD, [], {
        execArgv: [],
        serialization: 'json',
        // Its stdout is not the daemon's: it never writes there, and a child started on the daemon's
        // stdout pipe would make it blocking again for the daemon's log sink too (log.ts).
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      }),
    );
    const w: Worker = { child, calls: new Map(), forkedAt: Date.now() };
    child.on('message', (msg: { id: number; outcome?: ProcessOutcome; pong?: true; started?: PluginProcess }) => {
      if (msg.started) this.started(w, msg.id, msg.started);
      else this.finish(w, msg.id, msg.outcome ?? (msg.pong ? PONG : undefined));
    });
    // Without a listener a failed fork (EAGAIN, ENOMEM) would be an uncaught 'error' event.
    child.on('error', (e) => {
      this.log.error({ err: e.message }, 'plugin spawner process error');
      if (this.current === w) this.current = undefined;
      for (const id of [...w.calls.keys()]) {
        this.finish(
          w,
          id,
          undefined,
          new CniError(ErrorCode.PluginExecFailed, `the plugin spawner failed: ${e.message}`),
        );
      }
    });
    child.on('exit', (code, signal) => this.exited(w, code, signal));
    this.current = w;
    return w;
  }

  /**
   * The spawner process ended: calls still in flight fail, but only once the plugins it was running
   * are gone (their steps are then rolled back, never left running behind the journal's back).
   */
  private exited(w: Worker, code: number | null, signal: NodeJS.Signals | null): void {
    const child = w.child;
    if (this.current === w) this.current = undefined;
    if (w.calls.size === 0) return;
    const orphans = [...w.calls.values()].flatMap((c) => (c.process ? [c.process] : []));
    this.log.error(
      { code, signal, inFlight: w.calls.size, orphans: orphans.map((p) => p.pid) },
      'plugin spawner exited with calls in flight; killing the plugins it was running',
    );
    const how = signal ? `killed by ${signal}` : `status ${code}`;
    const fail = () => {
      for (const id of [...w.calls.keys()]) {
        this.finish(
          w,
          id,
          undefined,
          new CniError(
            ErrorCode.PluginExecFailed,
            `the plugin spawner exited (pid ${child.pid ?? '?'}, ${how}) while the call was in flight; a plugin's outcome is unknown`,
          ),
        );
      }
    };
    // The calls fail (and their steps are rolled back) only once their plugins are gone.
    stopGroups(orphans).then(
      (out) => {
        if (out.survivors.length > 0)
          this.log.error({ survivors: out.survivors }, 'plugin processes survived SIGKILL (stuck in the kernel)');
        fail();
      },
      (e: unknown) => {
        this.log.error({ err: String(e) }, 'cannot kill the plugins of a dead spawner');
        fail();
      },
    );
  }

  /** A spawner keeps the daemon alive only while a plugin runs (recovery runs before the server listens). */
  private hold(w: Worker): void {
    const channel = w.child.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (w.calls.size > 0) {
      w.child.ref();
      channel?.ref?.();
    } else {
      w.child.unref();
      channel?.unref?.();
    }
  }
}
