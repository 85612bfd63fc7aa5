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
/** Sets the dir's mtime (and atime) `ms` in the past. */
const back = (dir: string, ms: number) => {
  const t = (Date.now() - ms) / 1000;
  utimesSync(dir, t, t);
};

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
    back(dir, 60_000);
    const l = new SpoolListings();
    assert.deepEqual([...l.names(dir)!.keys()], ['first']);
    // A file made while the mtime is put back: the kept listing is answered (not listed again).
    writeFileSync(join(dir, name('hidden')), '{}');
    back(dir, 60_000);
    assert.deepEqual([...l.names(dir)!.keys()], ['first'], 'not listed again: the mtime did not change');
    back(dir, 30_000);
    assert.deepEqual([...l.names(dir)!.keys()].sort(), ['first', 'hidden'], 'listed again: the mtime moved');
  });

  test('a listing made within a coarse tick of the mtime is not kept: a file made in the same tick is seen', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    writeFileSync(join(dir, name('early')), '{}');
    const l = new SpoolListings();
    const mtime = Date.now(); // the dir changed just now
    utimesSync(dir, mtime / 1000, mtime / 1000);
    assert.deepEqual([...l.names(dir)!.keys()], ['early']);
    writeFileSync(join(dir, name('same-tick')), '{}');
    utimesSync(dir, mtime / 1000, mtime / 1000); // as a coarse clock would stamp it
    assert.deepEqual([...l.names(dir)!.keys()].sort(), ['early', 'same-tick']);
  });

  test('a large dir is listed at most once a second', () => {
    const dir = mkdtempSync(join(root, `d${n++}-`));
    for (let i = 0; i < 2049; i++) writeFileSync(join(dir, name(`c${i}`)), '{}');
    const l = new SpoolListings();
    assert.equal(l.names(dir)!.size, 2049);
    writeFileSync(join(dir, name('late')), '{}');
    assert.equal(l.names(dir)!.has('late'), false, 'within the second: the kept listing');
  });
});
