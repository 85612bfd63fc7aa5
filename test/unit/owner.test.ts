// State-dir ownership (daemon/src/store/owner.ts): exclusive, all-or-nothing over several dirs,
// named owner in the error, released on release() (the kernel does it on exit; see
// test/integration/ownership.test.ts for two processes and kill -9).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OWNER_INFO_FILE, StateDirBusyError, takeOwnership } from '../../daemon/src/store/owner.js';

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
            `state dir ${a} is owned by another stewardd \\(pid ${process.pid}, started .*serving /run/x\\.sock\\)`,
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
