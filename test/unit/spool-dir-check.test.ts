// Whether stewardd trusts a spool dir (daemon/src/spool-dir-check.ts): a spooled DEL names the
// plugins it runs as root, so a dir or an ancestor another user could write to or replace is a
// readiness problem, never drained. Owners other than the test's own user need root to make.

import assert from 'node:assert/strict';
import { chmodSync, chownSync, lchownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { makeMissing, spoolDirProblem } from '../../daemon/src/spool-dir-check.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-trust-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
/** A dir of its own, 0700 as the shim makes it, under a dir only we can write to. */
const fresh = (mode = 0o700) => {
  const d = join(root, `d-${++n}`);
  mkdirSync(d);
  chmodSync(d, mode);
  return d;
};
const asRoot = { skip: process.geteuid?.() !== 0 && 'needs root (chown)' };
const NOBODY = 65534;

describe('spool dir trust', () => {
  test('a dir made 0700 as the shim makes it, under /tmp (sticky) and a 0700 parent, is trusted', () => {
    const parent = fresh();
    const spool = join(parent, 'spool');
    mkdirSync(spool, { mode: 0o700 });
    assert.equal(spoolDirProblem(spool), undefined);
  });

  test('a dir writable by others is refused, naming its mode', () => {
    const d = fresh(0o777);
    assert.equal(
      spoolDirProblem(d),
      'it is writable by others (mode 0777): a DEL spooled there names the plugins stewardd runs as root',
    );
  });

  test('a dir another user owns is refused, even 0700', asRoot, () => {
    const d = fresh();
    chownSync(d, NOBODY, NOBODY);
    assert.match(spoolDirProblem(d) ?? '', /^it belongs to uid 65534: /);
  });

  test('a dir writable by a group other than root and ours is refused', asRoot, () => {
    const d = fresh(0o770);
    chownSync(d, 0, NOBODY);
    assert.match(spoolDirProblem(d) ?? '', /^it is writable by group 65534 \(mode 0770\)/);
    chownSync(d, 0, 0);
    assert.equal(spoolDirProblem(d), undefined, "root's group may write");
  });

  test('an ancestor writable by others is refused without the sticky bit, trusted with it', () => {
    const parent = fresh(0o777);
    const spool = join(parent, 'spool');
    mkdirSync(spool, { mode: 0o700 });
    assert.equal(
      spoolDirProblem(spool),
      `its parent ${parent} is writable by others (mode 0777) without the sticky bit: it could be replaced`,
    );
    chmodSync(parent, 0o1777);
    assert.equal(spoolDirProblem(spool), undefined);
  });

  test('an ancestor another user owns could be replaced: refused', asRoot, () => {
    const parent = fresh(0o755);
    const spool = join(parent, 'spool');
    mkdirSync(spool, { mode: 0o700 });
    chownSync(parent, NOBODY, NOBODY);
    assert.equal(spoolDirProblem(spool), `its parent ${parent} belongs to uid 65534: it could be replaced`);
  });

  test('through a symbolic link both paths are checked: the link in a safe dir to a dir under an unsafe one', () => {
    const unsafeParent = fresh(0o777);
    const target = join(unsafeParent, 'spool');
    mkdirSync(target, { mode: 0o700 });
    const link = join(fresh(), 'spool');
    symlinkSync(target, link);
    assert.match(spoolDirProblem(link) ?? '', new RegExp(`^its parent ${unsafeParent} is writable by others`));
    chmodSync(unsafeParent, 0o755);
    assert.equal(spoolDirProblem(link), undefined, 'a link to a safe dir is drained through');
  });

  test('a dir that does not exist yet is no problem; stewardd makes it 0700 first, as the shim would', () => {
    const dir = join(fresh(), 'not', 'yet');
    assert.equal(spoolDirProblem(dir), undefined);
    makeMissing(dir);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, '..')).mode & 0o777, 0o700);
    assert.equal(spoolDirProblem(dir), undefined);
  });

  test('a symbolic link on the path that another user owns could be pointed elsewhere: refused', asRoot, () => {
    const target = join(fresh(), 'spool');
    mkdirSync(target, { mode: 0o700 });
    const link = join(fresh(), 'spool');
    symlinkSync(target, link);
    assert.equal(spoolDirProblem(link), undefined, "root's link");
    lchownSync(link, NOBODY, NOBODY);
    assert.equal(
      spoolDirProblem(link),
      'it is a symbolic link that belongs to uid 65534, who could point it elsewhere',
    );
    const parentLink = join(fresh(), 'p');
    symlinkSync(join(target, '..'), parentLink);
    lchownSync(parentLink, NOBODY, NOBODY);
    assert.equal(
      spoolDirProblem(join(parentLink, 'spool')),
      `its parent ${parentLink} belongs to uid 65534: it could be replaced`,
    );
  });
});
