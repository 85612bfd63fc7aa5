// The plugin spawner keeps its memory small, since every plugin start forks it and fork's cost grows
// with the forking process's memory (daemon/src/plugins/spawner-child.ts sets V8 to optimise for
// size). The built spawner-child.js, forked as stewardd forks it, against the same file with that one
// flag dropped (bench/fixtures/default-heap.mjs), each running /bin/true 5,000 times, one to each in
// turn. The bench row spawner-heap (bench/rows/spawner-heap.ts) measures the same at 16,000 runs,
// with the time of a run. test/unit/exit-hang.test.ts checks the flag is set; this, that it works.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../helpers/env.js';

const RUNS = 5000;
/** One run's bound: /bin/true answers in milliseconds; a spawner that stops answering fails the test. */
const RUN_BOUND_MS = 15_000;
/** Below this the default heap did not grow enough to tell the two apart (the spawner's: 17-25 MiB). */
const DEFAULT_HEAP_GREW_KIB = 40 * 1024;

interface Spawner {
  child: ChildProcess;
  run: () => Promise<number | null>;
  /** RssAnon of /proc/<pid>/status, in KiB: the memory fork copies the page tables of. */
  anonKiB: () => number;
}

/** A spawner process as stewardd forks it, given /bin/true jobs one at a time; its death fails them. */
function spawner(preload?: string): Spawner {
  const child = fork(join(REPO, 'daemon/dist/plugins/spawner-child.js'), [], {
    execArgv: preload === undefined ? [] : ['--import', preload],
    serialization: 'json',
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve: (code: number | null) => void; reject: (e: Error) => void }>();
  const fail = (why: string) => {
    for (const w of waiting.values()) w.reject(new Error(`spawner ${child.pid} ${why}`));
    waiting.clear();
  };
  child.on('message', (m: { id: number; outcome?: { code: number | null } }) => {
    if (!m.outcome) return;
    waiting.get(m.id)?.resolve(m.outcome.code);
    waiting.delete(m.id);
  });
  child.on('exit', (code, signal) => fail(`exited (${code ?? signal})`));
  child.on('error', (e) => fail(`failed: ${e.message}`));
  let next = 0;
  const job = { file: '/bin/true', env: {}, stdin: '', timeoutMs: 10_000, maxOutputBytes: 65_536 };
  const run = () =>
    new Promise<number | null>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`spawner ${child.pid}: no outcome in ${RUN_BOUND_MS} ms`));
      }, RUN_BOUND_MS);
      const settled =
        <T>(f: (v: T) => void) =>
        (v: T) => {
          clearTimeout(timer);
          f(v);
        };
      waiting.set(id, { resolve: settled(resolve), reject: settled(reject) });
      child.send({ id, job });
    });
  const anonKiB = () =>
    Number(/^RssAnon:\s+(\d+)/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN);
  return { child, run, anonKiB };
}

describe('the plugin spawner on V8 optimising for size', () => {
  it(
    `holds under 4/5 of the default heap's anonymous memory after ${RUNS} plugin runs`,
    { timeout: 300_000 },
    async (t) => {
      const shipped = spawner();
      const plain = spawner(join(REPO, 'bench/fixtures/default-heap.mjs'));
      try {
        for (let i = 0; i < RUNS; i++) {
          assert.equal(await shipped.run(), 0);
          assert.equal(await plain.run(), 0);
        }
        // The median of three readings each: a collection can move either by a few MiB at any moment.
        const readings: Array<[number, number]> = [];
        for (let k = 0; k < 3; k++) {
          readings.push([shipped.anonKiB(), plain.anonKiB()]);
          await new Promise((r) => setTimeout(r, 50));
        }
        const mid = (xs: number[]) => xs.sort((x, y) => x - y)[1] as number;
        const [a, b] = [mid(readings.map((r) => r[0])), mid(readings.map((r) => r[1]))];
        assert.ok(a > 0 && b > 0, `RssAnon read: ${a} and ${b} KiB`);
        // V8 sizes its heap from the machine's memory: where the default heap stayed small there is
        // nothing to hold the spawner against.
        if (b < DEFAULT_HEAP_GREW_KIB) {
          t.skip(`the default heap holds ${b} KiB after ${RUNS} runs: too little to tell the two apart here`);
          return;
        }
        assert.ok(a < 0.8 * b, `the spawner holds ${a} KiB anonymous, the same on the default heap ${b} KiB`);
      } finally {
        shipped.child.kill('SIGKILL');
        plain.child.kill('SIGKILL');
      }
    },
  );
});
