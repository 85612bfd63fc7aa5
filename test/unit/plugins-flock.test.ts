// holdFlock (daemon/src/plugins/flock.ts) against util-linux's flock(1) on a temp file, as host-local
// would contend for it: the lock is held (another flock cannot have it) until released, a held
// lock is waited for, and one held past the wait is refused, never assumed.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { holdFlock } from '../../daemon/src/plugins/flock.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-flock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Whether another process could take the lock right now. */
const free = (file: string) => spawnSync('flock', ['--exclusive', '--nonblock', file, 'true']).status === 0;

/** Another process holding the lock until its stdin closes; resolves once it holds it. */
function holder(file: string): Promise<{ stop: () => void }> {
  const p = spawn('flock', ['--exclusive', file, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
  return new Promise((resolve) => {
    const check = setInterval(() => {
      if (free(file)) return;
      clearInterval(check);
      resolve({ stop: () => p.stdin.end() });
    }, 20);
  });
}

describe('holdFlock', () => {
  it('holds the lock (created if absent) until released', async () => {
    const f = join(dir, 'lock-a');
    assert.ok(!existsSync(f));
    const held = await holdFlock(f, 1000);
    assert.ok(existsSync(f));
    assert.equal(free(f), false, 'another flock cannot have it meanwhile');
    held.release();
    held.release();
    assert.equal(free(f), true, 'released');
  });

  it('waits for a held lock, and has it once the holder lets go', async () => {
    const f = join(dir, 'lock-b');
    const h = await holder(f);
    const t0 = Date.now();
    setTimeout(() => h.stop(), 400);
    const held = await holdFlock(f, 10_000);
    assert.ok(Date.now() - t0 >= 350, `waited ${Date.now() - t0} ms`);
    assert.equal(free(f), false);
    held.release();
  });

  it('refuses a lock still held after the wait', async () => {
    const f = join(dir, 'lock-c');
    const h = await holder(f);
    try {
      await assert.rejects(holdFlock(f, 200), /cannot lock .*lock-c: still held by another process after 200 ms/);
    } finally {
      h.stop();
    }
  });
});
