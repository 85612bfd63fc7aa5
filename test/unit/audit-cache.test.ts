// libcni result-cache entries found by their JSON (network names with '-' included); other files skipped.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
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
