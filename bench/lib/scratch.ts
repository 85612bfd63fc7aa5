// The bench run's scratch space: one temp dir and one undo stack for every netns, bridge, process and
// file a benchmark makes. run.ts closes it at the end, on failure and on Ctrl-C. Bench keeps its own
// (not test/helpers'): a benchmark must not change when a test helper does.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Runs a command for its effect on the machine, ignoring "already gone". */
export function bestEffort(cmd: string, args: string[]): void {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
  } catch {
    /* nothing to undo */
  }
}

export class Scratch {
  readonly dir: string;
  private readonly undo: Array<() => unknown> = [];
  private made = 0;

  constructor(purpose: string) {
    this.dir = mkdtempSync(join(tmpdir(), `steward-${purpose}-`));
    this.defer(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  /** Work to undo at close(), last registered first. */
  defer(fn: () => unknown): void {
    this.undo.push(fn);
  }

  /** A bridge name (IFNAMSIZ: at most 15 bytes) removed at close, whether or not a plugin made it. */
  bridge(): string {
    const name = `stwbench${process.pid % 1000}x${this.made++}`.slice(0, 15);
    this.defer(() => bestEffort('ip', ['link', 'del', name]));
    return name;
  }

  /** A /24 in 10.250/16 chosen per process, away from the test suites' 10.200–10.249 range. */
  subnet(): string {
    return `10.250.${(process.pid + this.made++) % 250}.0/24`;
  }

  async close(): Promise<void> {
    for (let fn = this.undo.pop(); fn !== undefined; fn = this.undo.pop()) {
      try {
        await fn();
      } catch {
        /* keep undoing */
      }
    }
  }
}
