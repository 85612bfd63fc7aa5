// containerd 2.x's STATUS loop in a process of its own (bench/fixtures/status-ticker, Go): the same
// ticks as test/helpers/cri/cni-status.ts's StatusLoop, but each STATUS timed by a Go process the
// way containerd's own exec sees it, not by the bench's event loop, which a 100-pod burst keeps busy
// for hundreds of ms at a time (issue 37: its lag was most of a STATUS's measured wall time).

import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

/** One tick: the shape of test/helpers/cri/cni-status.ts's Tick (bench/lib/ imports no test helper). */
export interface StatusTick {
  /** When the tick started, performance.now() ms. */
  at: number;
  ms: number;
  ready: boolean;
  execs: number;
  reason?: string;
  message?: string;
  code?: number | null;
}

interface Line {
  at: number;
  ms: number;
  ready: boolean;
  code?: number;
  msg?: string;
}

/** One run of the ticker: start() spawns it, stop() closes its stdin and waits for its last tick. */
export class GoStatusLoop {
  readonly ticks: StatusTick[] = [];
  private proc: ChildProcess | undefined;
  private ended: Promise<void> | undefined;

  /** `list`: the conflist as containerd reads it, written to `listFile` for the ticker. */
  constructor(
    private readonly ticker: string,
    private readonly list: unknown,
    private readonly listFile: string,
    private readonly binDirs: string[],
    private readonly periodMs: number,
  ) {}

  start(): void {
    writeFileSync(this.listFile, JSON.stringify(this.list));
    const proc = spawn(
      this.ticker,
      ['-conflist', this.listFile, '-bin', this.binDirs.join(':'), '-period', `${this.periodMs}ms`],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    this.proc = proc;
    const lines = createInterface({ input: proc.stdout! });
    lines.on('line', (l) => {
      const t = JSON.parse(l) as Line;
      this.ticks.push({
        // The ticker's wall clock (unix ms) on this process's performance.now() scale.
        at: t.at - performance.timeOrigin,
        ms: t.ms,
        ready: t.ready,
        execs: 1,
        ...(t.ready
          ? {}
          : {
              reason: 'NetworkPluginNotReady',
              message: `Network plugin returns error: ${t.msg ?? ''}`,
              code: t.code ?? null,
            }),
      });
    });
    this.ended = new Promise((resolve, reject) =>
      proc.on('close', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`status-ticker exited ${code ?? signal}`)),
      ),
    );
  }

  async stop(): Promise<void> {
    this.proc?.stdin?.end();
    await this.ended;
  }
}
