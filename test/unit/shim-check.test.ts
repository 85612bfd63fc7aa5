// lifecycle/shim-check.ts: the installed shim (the path install recorded) compared with the daemon's
// own by sha256, rehashed only when its stat changes, and the reasons it gives.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ShimCheck } from '../../daemon/src/lifecycle/shim-check.js';
import { writeRecord, type InstallRecord } from '../../daemon/src/lifecycle/record.js';

const log = pino({ level: 'silent' });
const base = mkdtempSync(join(tmpdir(), 'stw-shimcheck-'));
after(() => rmSync(base, { recursive: true, force: true }));
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

function node(name: string) {
  const dir = join(base, name);
  const stateDir = join(dir, 'state');
  const own = join(dir, 'own-steward');
  const installed = join(dir, 'steward');
  mkdirSync(dir);
  writeFileSync(own, 'build A');
  return { stateDir, own, installed };
}

function record(stateDir: string, installed: string): void {
  const rec: InstallRecord = {
    version: 1,
    state: 'installed',
    cniBinDir: base,
    cniConfDir: base,
    socket: join(base, 's.sock'),
    spoolDir: join(base, 'spool'),
    shim: { path: installed, sha256: 'recorded' },
  };
  writeRecord(stateDir, rec);
}

describe('ShimCheck', () => {
  it('no record, no installed file: no problem; the same build: none; another build: both sha256s named', () => {
    const n = node('a');
    const c = new ShimCheck({ stateDir: n.stateDir, ownShim: n.own, log });
    c.check();
    assert.equal(c.problem(), undefined);
    record(n.stateDir, n.installed);
    c.check();
    assert.equal(c.problem(), undefined, 'recorded but not on disk: not this check');
    writeFileSync(n.installed, 'build A');
    c.check();
    assert.equal(c.problem(), undefined);
    assert.equal(c.mismatch(), 0);
    writeFileSync(n.installed, 'build B');
    c.check();
    assert.equal(
      c.problem(),
      `installed shim ${n.installed} sha256 ${sha('build B')} is not this stewardd's (${sha('build A')}): run stewardd install / roll the DaemonSet`,
    );
    assert.equal(c.mismatch(), 1);
    unlinkSync(n.installed);
    c.check();
    assert.equal(c.mismatch(), 0);
  });

  it('sees a same-size rewrite even with its mtime put back (ctime moves), and the build put back', () => {
    const n = node('b');
    record(n.stateDir, n.installed);
    writeFileSync(n.installed, 'build A');
    const c = new ShimCheck({ stateDir: n.stateDir, ownShim: n.own, log });
    c.check();
    assert.equal(c.mismatch(), 0);
    // Rewritten in place, same size, mtime put back: ctime still moves, so the stamp differs.
    writeFileSync(n.installed, 'build Z');
    utimesSync(n.installed, new Date(0), new Date(0));
    c.check();
    assert.equal(c.mismatch(), 1);
    writeFileSync(n.installed, 'build A');
    c.check();
    assert.equal(c.mismatch(), 0);
  });

  it('an own shim that cannot be read turns the check off instead of failing readiness', () => {
    const n = node('c');
    record(n.stateDir, n.installed);
    writeFileSync(n.installed, 'build B');
    const c = new ShimCheck({ stateDir: n.stateDir, ownShim: join(base, 'missing'), log });
    c.check();
    assert.equal(c.problem(), undefined);
  });
});
