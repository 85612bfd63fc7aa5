// libcni result-cache entries found by their JSON (network names with '-' included); other files skipped.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { scanCache } from '../../daemon/src/audit/cache.js';

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
