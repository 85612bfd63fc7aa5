// The plugin spawner keeps its memory small, since every plugin start forks it and fork's cost grows
// with the forking process's memory (daemon/src/plugins/spawner-child.ts sets V8 to optimise for
// size). The built spawner-child.js, forked as stewardd forks it, against the same file with that one
// flag dropped (bench/fixtures/default-heap.mjs), each running /bin/true 3,000 times, one to each in
// turn. The bench row spawner-heap (bench/rows/spawner-heap.ts) measures the same at 16,000 runs,
// with the time of a run.

import { it } from 'node:test';
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../helpers/env.js';

const RUNS = 3000;

/** A spawner process as stewardd forks it, given /bin/true jobs one at a time. */
function spawner(preload?: string): { child: ChildProcess; run: () => Promise<number | null> } {
  const child = fork(join(REPO, 'daemon/dist/plugins/spawner-child.js'), [], {
    execArgv: preload === undefined ? [] : ['--import', preload],
    serialization: 'json',
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (code: number | null) => void>();
  child.on('message', (m: { id: number; outcome?: { code: number | null } }) => {
    if (m.outcome) waiting.get(m.id)?.(m.outcome.code);
  });
  let next = 0;
  const job = { file: '/bin/true', env: {}, stdin: '', timeoutMs: 10_000, maxOutputBytes: 65_536 };
  const run = () =>
    new Promise<number | null>((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      child.send({ id, job });
    });
  return { child, run };
}

/** RssAnon of /proc/<pid>/status, in KiB: the memory fork copies the page tables of. */
function anonKiB(pid: number | undefined): number {
  return Number(/^RssAnon:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

it("keeps the spawner's anonymous memory under 4/5 of the default heap's after 3,000 plugin runs", async () => {
  const shipped = spawner();
  const plain = spawner(join(REPO, 'bench/fixtures/default-heap.mjs'));
  try {
    for (let i = 0; i < RUNS; i++) {
      assert.equal(await shipped.run(), 0);
      assert.equal(await plain.run(), 0);
    }
    const [a, b] = [anonKiB(shipped.child.pid), anonKiB(plain.child.pid)];
    assert.ok(a > 0 && b > 0, `RssAnon read: ${a} and ${b} KiB`);
    assert.ok(a < 0.8 * b, `the spawner holds ${a} KiB anonymous, the same on the default heap ${b} KiB`);
  } finally {
    shipped.child.kill('SIGKILL');
    plain.child.kill('SIGKILL');
  }
});
