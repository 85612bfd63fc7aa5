// holdFlock (daemon/src/plugins/flock.ts) against util-linux's flock(1) on a temp file, as host-local
// would contend for it: the lock is held (another flock cannot have it) until released, a held
// lock is waited for, and one held past the wait is refused, never assumed.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
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

describe('holdFlock on a lock path that is not a plain file', () => {
  // Run in a child: a blocking open of a FIFO would stop this process's event loop, timers included.
  const attempt = (file: string) =>
    spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { holdFlock } from ${JSON.stringify(new URL('../../daemon/src/plugins/flock.ts', import.meta.url).pathname)};
         holdFlock(${JSON.stringify(file)}, 1000).then(() => console.log('held'), (e) => console.log(e.message));`,
      ],
      { encoding: 'utf8', timeout: 15_000 },
    );

  it('refuses a FIFO named lock at once instead of blocking the daemon in open(2)', () => {
    const f = join(dir, 'lock-fifo');
    assert.equal(spawnSync('mkfifo', [f]).status, 0);
    const r = attempt(f);
    assert.equal(r.signal, null, 'the open of a FIFO nobody writes to must not hang');
    assert.match(r.stdout, /cannot lock .*lock-fifo: not a regular file/);
  });

  it('refuses a symlink named lock, and creates nothing where it points', () => {
    const target = join(dir, 'elsewhere');
    const f = join(dir, 'lock-link');
    symlinkSync(target, f);
    const r = attempt(f);
    assert.match(r.stdout, /cannot open the lock file .*lock-link/);
    assert.ok(!existsSync(target), 'nothing created through the link');
  });
});
