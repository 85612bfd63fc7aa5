// A spool dir's listing by container (daemon/src/spool-listing.ts), asked on every ADD and CHECK:
// kept while the dir's mtime is unchanged and older than a coarse timestamp tick, listed again once
// it changes; a large dir at most once a second.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { SpoolListings } from '../../daemon/src/spool-listing.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-listing-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const name = (id: string, r = 1) =>
  `${String(Date.now()).padStart(15, '0')}-${id}-${r.toString(16).padStart(8, '0')}.json`;
/** Sets the dir's mtime (and atime) to `t` (seconds since the epoch, a whole number: the same value twice is the same mtime). */
const stamp = (dir: string, t: number) => utimesSync(dir, t, t);
const secondsAgo = (s: number) => Math.floor(Date.now() / 1000) - s;

describe('SpoolListings', () => {
  test('names by container prefix; none for a dir that is not there', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('a', 1)), '{}');
    writeFileSync(join(dir, name('a', 2)), '{}');
    writeFileSync(join(dir, name('b')), '{}');
    writeFileSync(join(dir, 'not-a-spool-name.json'), '{}');
    const byPrefix = new SpoolListings().names(dir)!;
    assert.deepEqual([...byPrefix.entries()].map(([k, v]) => [k, v.length]).sort(), [
      ['a', 2],
      ['b', 1],
    ]);
    assert.equal(new SpoolListings().names(join(root, 'missing')), undefined);
  });

  test('kept while the mtime is unchanged and settled; listed again once it changes', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('first')), '{}');
    const old = secondsAgo(60);
    stamp(dir, old);
    const l = new SpoolListings(() => old * 1000 + 30_000); // listed 30 s after that mtime: settled
    assert.deepEqual([...l.names(dir)!.keys()], ['first']);
    // A file made, then the mtime put back to exactly what it was: the kept listing is answered.
    writeFileSync(join(dir, name('hidden')), '{}');
    stamp(dir, old);
    assert.deepEqual([...l.names(dir)!.keys()], ['first'], 'not listed again: the mtime did not change');
    stamp(dir, old + 30);
    assert.deepEqual([...l.names(dir)!.keys()].sort(), ['first', 'hidden'], 'listed again: the mtime moved');
  });

  test('a listing made within a coarse tick of the mtime is not kept: a file made in the same tick is seen', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('early')), '{}');
    const t = secondsAgo(60);
    // Listed 5 ms after the dir's mtime, by the listing's clock: within a coarse tick.
    const l = new SpoolListings(() => t * 1000 + 5);
    stamp(dir, t);
    assert.deepEqual([...l.names(dir)!.keys()], ['early']);
    writeFileSync(join(dir, name('same-tick')), '{}');
    stamp(dir, t); // the same stamp, as a coarse clock would give it
    assert.deepEqual([...l.names(dir)!.keys()].sort(), ['early', 'same-tick']);
  });

  test('a large dir is listed at most once a second', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    for (let i = 0; i < 2049; i++) writeFileSync(join(dir, name(`c${i}`)), '{}');
    let now = Date.now() + 60_000;
    const l = new SpoolListings(() => now);
    assert.equal(l.names(dir)!.size, 2049);
    writeFileSync(join(dir, name('late')), '{}');
    now += 999;
    assert.equal(l.names(dir)!.has('late'), false, 'within the second: the kept listing');
    now += 1;
    assert.equal(l.names(dir)!.has('late'), true, 'a second on: listed again');
  });
});
