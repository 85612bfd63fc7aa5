// A spool dir's listing by container (daemon/src/spool-listing.ts), asked on every ADD and CHECK:
// kept while the dir's mtime is unchanged and older than a coarse timestamp tick, listed again once
// it changes; a large dir that changed is listed off the loop, never answered from an older listing.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import {
  LARGE_DIR_BYTES,
  LARGE_SPOOL,
  MTIME_TICK_MS,
  SpoolListings,
  type ByPrefix,
} from '../../daemon/src/spool-listing.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-listing-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const name = (id: string, r = 1) =>
  `${String(Date.now()).padStart(15, '0')}-${id}-${r.toString(16).padStart(8, '0')}.json`;
/** Sets the dir's mtime (and atime) to `t` (seconds since the epoch, a whole number: the same value twice is the same mtime). */
const stamp = (dir: string, t: number) => utimesSync(dir, t, t);
const secondsAgo = (s: number) => Math.floor(Date.now() / 1000) - s;
/** `current` answered without waiting: a Map (or undefined), not a promise. */
const now = (l: SpoolListings, dir: string): ByPrefix => {
  const r = l.current(dir);
  assert.ok(!(r instanceof Promise), 'answered at once');
  return r!;
};

describe('SpoolListings', () => {
  test('names by container prefix; none for a dir that is not there', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('a', 1)), '{}');
    writeFileSync(join(dir, name('a', 2)), '{}');
    writeFileSync(join(dir, name('b')), '{}');
    writeFileSync(join(dir, 'not-a-spool-name.json'), '{}');
    const byPrefix = now(new SpoolListings(), dir);
    assert.deepEqual([...byPrefix.entries()].map(([k, v]) => [k, v.length]).sort(), [
      ['a', 2],
      ['b', 1],
    ]);
    assert.equal(new SpoolListings().current(join(root, 'missing')), undefined);
    assert.equal(new SpoolListings().recent(join(root, 'missing')), undefined);
  });

  test('kept while the mtime is unchanged and settled; listed again once it changes', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('first')), '{}');
    const old = secondsAgo(60);
    stamp(dir, old);
    const l = new SpoolListings(() => old * 1000 + 30_000); // listed 30 s after that mtime: settled
    assert.deepEqual([...now(l, dir).keys()], ['first']);
    // A file made, then the mtime put back to exactly what it was: the kept listing is answered.
    writeFileSync(join(dir, name('hidden')), '{}');
    stamp(dir, old);
    assert.deepEqual([...now(l, dir).keys()], ['first'], 'not listed again: the mtime did not change');
    stamp(dir, old + 30);
    assert.deepEqual([...now(l, dir).keys()].sort(), ['first', 'hidden'], 'listed again: the mtime moved');
  });

  test('a listing made within a coarse tick of the mtime is not kept: a file made in the same tick is seen', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('early')), '{}');
    const t = secondsAgo(60);
    // Listed a second after the dir's mtime, by the listing's clock: within a coarse (vfat's 2 s) tick.
    assert.ok(1000 < MTIME_TICK_MS);
    const l = new SpoolListings(() => t * 1000 + 1000);
    stamp(dir, t);
    assert.deepEqual([...now(l, dir).keys()], ['early']);
    writeFileSync(join(dir, name('same-tick')), '{}');
    stamp(dir, t); // the same stamp, as a coarse clock would give it
    assert.deepEqual([...now(l, dir).keys()].sort(), ['early', 'same-tick']);
  });

  test('a large dir that changed is listed off the loop, and a file spooled a moment ago is in it', async () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    for (let i = 0; i <= LARGE_SPOOL; i++) writeFileSync(join(dir, name(`c${i}`)), '{}');
    let clock = Date.now() + 60_000;
    const l = new SpoolListings(() => clock);
    // First seen: large by its size on disk where the file system says so (tmpfs, ext4), else listed at once.
    const first = l.current(dir);
    if (statSync(dir).size >= LARGE_DIR_BYTES)
      assert.ok(first instanceof Promise, 'a dir first seen large: off the loop');
    assert.equal((await first)!.size, LARGE_SPOOL + 1);
    writeFileSync(join(dir, name('late')), '{}');
    clock += 1; // a millisecond later: the kept listing is not answered, however young
    const soon = l.current(dir);
    assert.ok(soon instanceof Promise, 'a large dir that changed: listed off the loop');
    // Asked again while that listing runs: one listing started after this call, shared.
    writeFileSync(join(dir, name('later')), '{}');
    const next = l.current(dir);
    const again = l.current(dir);
    assert.ok(next instanceof Promise && again instanceof Promise);
    assert.equal(next, again, 'callers that came while one ran share the next listing');
    assert.notEqual(next, soon);
    assert.equal((await soon)!.has('late'), true);
    assert.equal((await next)!.has('later'), true, 'the listing started after the call sees the file made before it');
    // `recent` (the retirement check) may answer a listing a second old.
    writeFileSync(join(dir, name('unseen')), '{}');
    assert.equal(l.recent(dir)!.has('unseen'), false, 'within the second: the kept listing');
    clock += 1000;
    assert.equal(l.recent(dir)!.has('unseen'), true, 'a second on: listed again');
  });

  test('other names make a dir large as spool files do (each costs the listing the same), and are not kept', async () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    for (let i = 0; i <= LARGE_SPOOL; i++) writeFileSync(join(dir, `.${name(`t${i}`)}.tmp`), '');
    const l = new SpoolListings(() => Date.now() + 60_000);
    assert.equal((await l.current(dir))!.size, 0, 'temp files are no spooled DELs');
    writeFileSync(join(dir, name('spooled')), '{}');
    const after = l.current(dir);
    assert.ok(after instanceof Promise, 'listed off the loop');
    assert.equal((await after)!.has('spooled'), true);
  });
});
