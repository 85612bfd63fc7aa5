// The namespace-kind cache of engine/netns.ts: an attachment's netns is checked at its ADD and at
// every teardown DEL, and telling a bind mount's kind reads all of mountinfo, so a kind is read once
// per path and namespace inode, and kept for at most 4096 of them (KIND_CACHE_MAX), then started
// afresh. The cache is not free of consequence: nsfs inode numbers are reused once a namespace is
// gone, so a path re-mounted with a namespace of another kind on a reused inode is answered from the
// cache. Without root: the paths are spellings of /proc/self/ns/net ("/./proc/…", "/.//proc/…"),
// each a key of its own, and the kind's reads are counted through node:fs's readlinkSync (the
// first thing a kind is read with), patched for this file's process only.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { after, before, describe, test } from 'node:test';

import { netnsProblem } from '../../daemon/src/engine/netns.js';

let readlinks = 0;
const realReadlink = fs.readlinkSync;

before(() => {
  fs.readlinkSync = ((...args: Parameters<typeof realReadlink>) => {
    readlinks++;
    return realReadlink(...args);
  }) as typeof realReadlink;
  syncBuiltinESMExports();
});

after(() => {
  fs.readlinkSync = realReadlink;
  syncBuiltinESMExports();
});

/** The i-th spelling of /proc/self/ns/net: 14 bits, each "./" or ".//" ahead of the path. */
function spelling(i: number): string {
  let p = '/';
  for (let b = 0; b < 14; b++) p += (i >> b) & 1 ? './' : './/';
  return `${p}proc/self/ns/net`;
}

/** How many reads telling the kind of `path` took: 0 when the cache answered. */
async function reads(path: string): Promise<number> {
  const before = readlinks;
  assert.equal(await netnsProblem(path), undefined, `${path} is a network namespace`);
  return readlinks - before;
}

describe("a namespace's kind is read once per path and inode", () => {
  test('asked again, a path is answered without reading its kind again; another path is read on its own', async () => {
    const a = spelling(1);
    const b = spelling(2);
    assert.ok((await reads(a)) > 0, 'read the first time');
    assert.equal(await reads(a), 0, 'not read again');
    assert.ok((await reads(b)) > 0, 'another path to the same namespace is another key');
    assert.equal(await reads(a), 0, 'the first is still kept');
    assert.equal(await reads(b), 0);
  });

  test('at most 4096 kinds are kept: the 4097th starts the cache afresh', async () => {
    // Where the cache stands is not known here (the test above filled some): fresh paths until one
    // clears it, seen as a sentinel read again; then it holds that path and the sentinel.
    const sentinel = spelling(0);
    await reads(sentinel);
    let next = 3;
    let cleared = false;
    for (let i = 0; i <= 4096 && !cleared; i++) {
      assert.ok((await reads(spelling(next++))) > 0);
      cleared = (await reads(sentinel)) > 0;
    }
    assert.ok(cleared, 'started afresh within 4097 new paths');
    // Two kept: 4094 more make 4096, all kept.
    for (let i = 0; i < 4094; i++) assert.ok((await reads(spelling(next++))) > 0);
    assert.equal(await reads(sentinel), 0, '4096 kinds kept');
    assert.ok((await reads(spelling(next))) > 0);
    assert.ok((await reads(sentinel)) > 0, 'the 4097th started afresh');
  });
});
