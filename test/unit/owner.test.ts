// State-dir ownership (daemon/src/store/owner.ts): exclusive, all-or-nothing over several dirs,
// named owner in the error, released on release() (the kernel does it on exit; see
// test/integration/ownership.test.ts for two processes and kill -9).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OWNER_INFO_FILE, OWNER_LOCK_FILE, StateDirBusyError, takeOwnership } from '../../daemon/src/store/owner.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-owner-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('takeOwnership', () => {
  it('is exclusive, names the owner, and is free again after release', () => {
    const a = join(dir, 'a');
    const first = takeOwnership([a], '/run/x.sock');
    const info = JSON.parse(readFileSync(join(a, OWNER_INFO_FILE), 'utf8'));
    assert.equal(info.pid, process.pid);
    assert.equal(info.socket, '/run/x.sock');
    assert.throws(
      () => takeOwnership([a], '/run/y.sock'),
      (e: unknown) => {
        assert.ok(e instanceof StateDirBusyError);
        assert.match(
          (e as Error).message,
          new RegExp(
            `^state dir ${a} is owned by another stewardd \\(pid ${process.pid}, started .*serving /run/x\\.sock\\); ` +
              'one daemon owns a state dir and its database: stop that one first, or give this one another --state-dir$',
          ),
        );
        return true;
      },
    );
    first.release();
    const again = takeOwnership([a], '/run/y.sock');
    assert.equal(JSON.parse(readFileSync(join(a, OWNER_INFO_FILE), 'utf8')).socket, '/run/y.sock');
    again.release();
  });

  it("refuses a busy dir at once: it does not sit in SQLite's busy wait (5 s) before saying who owns it", () => {
    const d = join(dir, 'quick');
    const holder = takeOwnership([d], '/run/q.sock');
    try {
      const t0 = performance.now();
      assert.throws(() => takeOwnership([d], '/run/q2.sock'), StateDirBusyError);
      const ms = performance.now() - t0;
      // Generous bound (the refusal takes a few ms); with a busy timeout it takes 5,000 ms at least.
      assert.ok(ms < 4000, `refused after ${Math.round(ms)} ms`);
    } finally {
      holder.release();
    }
  });

  it('a lock file that is not SQLite (damaged, or some other file) is a start-up error naming it, not "owned by another stewardd"', () => {
    const d = join(dir, 'notadb');
    mkdirSync(d);
    writeFileSync(join(d, OWNER_LOCK_FILE), 'not a database '.repeat(400));
    assert.throws(
      () => takeOwnership([d], '/run/n.sock'),
      (e: unknown) => {
        assert.ok(!(e instanceof StateDirBusyError), 'not reported as busy');
        assert.equal((e as Error).name, 'PathError');
        assert.equal((e as { code?: string }).code, 'SQLITE_NOTADB');
        assert.equal(
          (e as Error).message,
          `cannot take the owner lock ${join(d, OWNER_LOCK_FILE)}: file is not a database`,
        );
        return true;
      },
    );
    assert.equal(existsSync(join(d, OWNER_INFO_FILE)), false, 'no owner file is written without the lock');
  });

  it('a lock file that cannot be opened (here: a directory in its place) is a start-up error naming it', () => {
    const d = join(dir, 'lockdir');
    mkdirSync(join(d, OWNER_LOCK_FILE), { recursive: true });
    assert.throws(
      () => takeOwnership([d], '/run/l.sock'),
      (e: unknown) => {
        assert.ok(!(e instanceof StateDirBusyError), 'not reported as busy');
        assert.equal((e as { code?: string }).code, 'SQLITE_CANTOPEN');
        assert.equal(
          (e as Error).message,
          `cannot open the owner lock ${join(d, OWNER_LOCK_FILE)}: unable to open database file ` +
            '(check that the directory exists and that stewardd may write it)',
        );
        return true;
      },
    );
  });

  it('is all or nothing over several dirs: a busy second dir releases the first', () => {
    const b = join(dir, 'b');
    const c = join(dir, 'c');
    const holdsC = takeOwnership([c], '/run/c.sock');
    assert.throws(() => takeOwnership([b, c], '/run/bc.sock'), StateDirBusyError);
    const b2 = takeOwnership([b], '/run/b.sock'); // b was released by the failed attempt
    b2.release();
    holdsC.release();
  });
});
