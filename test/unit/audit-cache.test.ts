// libcni result-cache entries found by their JSON (network names with '-' included); other files skipped.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEFAULT_CACHE_DIR, releaseCache, scanCache } from '../../daemon/src/audit/cache.js';
import { DEFAULT_HOST_LOCAL_DIR } from '../../daemon/src/audit/leases.js';
import { existsSync } from 'node:fs';

test('scanCache reads containerId, ifName and networkName from each cache document', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const doc = { kind: 'cniCacheV1', containerId: 'dead2', ifName: 'eth0', networkName: 'my-net', config: '' };
  await writeFile(join(dir, 'my-net-dead2-eth0'), JSON.stringify(doc));
  await writeFile(join(dir, 'garbage'), 'not json');
  const found = await scanCache(dir, new Set());
  assert.deepEqual(
    found.map((f) => [f.kind, f.containerId, f.network, f.ifname, f.journalled]),
    [['cache', 'dead2', 'my-net', 'eth0', false]],
  );
  assert.deepEqual(await scanCache(join(dir, 'absent'), new Set()), []);
});

test(
  'scanCache reads only plain files: a FIFO is never waited on, a symlink never followed',
  { timeout: 10_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const doc = (id: string) =>
      JSON.stringify({ kind: 'cniCacheV1', containerId: id, ifName: 'eth0', networkName: 'n' });
    await writeFile(join(dir, 'n-dead2-eth0'), doc('dead2'));
    assert.equal(spawnSync('mkfifo', [join(dir, 'n-fifo-eth0')]).status, 0);
    await mkdir(join(dir, 'outside'));
    await writeFile(join(dir, 'outside', 'doc'), doc('linked'));
    await symlink(join(dir, 'outside', 'doc'), join(dir, 'n-linked-eth0'));
    const found = await scanCache(dir, new Set());
    assert.deepEqual(
      found.map((f) => f.containerId),
      ['dead2'],
    );
  },
);

test('scanCache: a document without a string container id is not a finding; its other fields are taken only as strings', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'n-num'), JSON.stringify({ containerId: 5, ifName: 'eth0', networkName: 'n' }));
  await writeFile(join(dir, 'n-empty'), JSON.stringify({ containerId: '', ifName: 'eth0', networkName: 'n' }));
  await writeFile(join(dir, 'n-none'), JSON.stringify({ ifName: 'eth0', networkName: 'n' }));
  await writeFile(join(dir, 'n-odd'), JSON.stringify({ containerId: 'odd', ifName: 7, networkName: ['n'], netns: 9 }));
  await writeFile(
    join(dir, 'n-nons'),
    JSON.stringify({ containerId: 'nons', ifName: 'eth1', networkName: 'n', netns: '' }),
  );
  await writeFile(
    join(dir, 'n-ns'),
    JSON.stringify({ containerId: 'ns', ifName: 'eth0', networkName: 'n', netns: '/var/run/netns/cni-1' }),
  );
  const found = await scanCache(dir, new Set(['ns']));
  assert.deepEqual(
    found.map((f) => [f.path.split('/').at(-1), f.containerId, f.network, f.ifname, f.netns, f.journalled]),
    [
      ['n-nons', 'nons', 'n', 'eth1', undefined, false],
      ['n-ns', 'ns', 'n', 'eth0', '/var/run/netns/cni-1', true],
      ['n-odd', 'odd', '', '', undefined, false],
    ],
  );
  assert.ok(
    found.every((f) => !('netns' in f) || f.netns !== undefined),
    'no netns field unless one is recorded',
  );
});

test('scanCache: a file over 1 MiB is not a cache document, even when its start parses; one of exactly 1 MiB is', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const doc = (id: string) => JSON.stringify({ containerId: id, ifName: 'eth0', networkName: 'n' });
  const padded = (id: string, size: number) => doc(id) + ' '.repeat(size - doc(id).length);
  await writeFile(join(dir, 'n-exact'), padded('exact', 1 << 20));
  await writeFile(join(dir, 'n-over'), padded('over', (1 << 20) + 4096));
  const found = await scanCache(dir, new Set());
  assert.deepEqual(
    found.map((f) => f.containerId),
    ['exact'],
  );
});

test('scanCache reports in path order, whatever order the directory lists', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const id of ['e', 'a', 'D', 'b', 'C'])
    await writeFile(join(dir, `n-${id}-eth0`), JSON.stringify({ containerId: id, ifName: 'eth0', networkName: 'n' }));
  assert.deepEqual(
    (await scanCache(dir, new Set())).map((f) => f.containerId),
    ['a', 'b', 'C', 'D', 'e'],
    'upper and lower case names interleaved, as a person reads them',
  );
});

test('releaseCache removes the file; one libcni removed meanwhile is nothing to release, not a failure', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'n-x-eth0');
  await writeFile(path, '{}');
  const f = {
    kind: 'cache' as const,
    containerId: 'x',
    network: 'n',
    ifname: 'eth0',
    ip: null,
    path,
    mtimeMs: 0,
    journalled: false,
  };
  assert.equal(await releaseCache(f), true);
  assert.equal(existsSync(path), false);
  assert.equal(await releaseCache(f), false);
});

test('the documented default directories', () => {
  assert.equal(DEFAULT_CACHE_DIR, '/var/lib/cni/results');
  assert.equal(DEFAULT_HOST_LOCAL_DIR, '/var/lib/cni/networks');
});
