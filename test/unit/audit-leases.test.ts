// host-local lease files read as host-local writes them (IP-named files holding `<id>\r\n<ifname>`),
// in a temp dataDir: the lock and last_reserved_ip files are not leases, an old id-only file still is.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseLease, scanLeases } from '../../daemon/src/audit/leases.js';

test('parseLease reads `<id>\\r\\n<ifname>` and the id-only form', () => {
  assert.deepEqual(parseLease('abc\r\neth0'), { containerId: 'abc', ifname: 'eth0' });
  assert.deepEqual(parseLease('abc'), { containerId: 'abc', ifname: '' });
  assert.equal(parseLease(''), null);
});

test('scanLeases finds every lease with its network, ip, age source and journal flag', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const net = join(dir, 'podnet');
  await mkdir(net);
  await writeFile(join(net, 'lock'), '');
  await writeFile(join(net, 'last_reserved_ip.0'), '10.9.0.3');
  await writeFile(join(net, '10.9.0.2'), 'dead1\r\neth0');
  await writeFile(join(net, '10.9.0.3'), 'known\r\nnet1');
  const old = new Date(Date.now() - 2 * 3600_000);
  await utimes(join(net, '10.9.0.2'), old, old);
  const found = await scanLeases(dir, new Set(['known']));
  assert.deepEqual(
    found.map((f) => [f.containerId, f.network, f.ifname, f.ip, f.journalled]),
    [
      ['dead1', 'podnet', 'eth0', '10.9.0.2', false],
      ['known', 'podnet', 'net1', '10.9.0.3', true],
    ],
  );
  assert.ok(Math.abs((found[0]?.mtimeMs ?? 0) - old.getTime()) < 1000);
  assert.deepEqual(await scanLeases(join(dir, 'absent'), new Set()), []);
});

test('scanLeases reads each network under its lock, released before the next; a network whose lock fails is skipped', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [net, ip] of [
    ['net-a', '10.1.0.2'],
    ['net-b', '10.2.0.2'],
    ['net-c', '10.3.0.2'],
  ] as const) {
    await mkdir(join(dir, net));
    await writeFile(join(dir, net, ip), `c-${net}\r\neth0`);
  }
  const events: string[] = [];
  const lock = async (file: string) => {
    const net = file.split('/').at(-2)!;
    if (net === 'net-b') throw new Error('held too long');
    events.push(`lock ${net} ${file.endsWith('/lock')}`);
    return () => events.push(`unlock ${net}`);
  };
  const skipped: string[] = [];
  const found = await scanLeases(dir, new Set(), lock, (d, e) => skipped.push(`${d.split('/').at(-1)}: ${e.message}`));
  assert.deepEqual(
    found.map((f) => f.ip),
    ['10.1.0.2', '10.3.0.2'],
  );
  assert.deepEqual(skipped, ['net-b: held too long']);
  assert.deepEqual(
    events.filter((e) => !e.includes('net-b')),
    ['lock net-a true', 'unlock net-a', 'lock net-c true', 'unlock net-c'],
  );
});

test(
  'scanLeases reads only plain files: a FIFO, a symlink, a directory named like an IP are skipped, never waited on or followed',
  { timeout: 10_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const net = join(dir, 'podnet');
    await mkdir(net);
    await writeFile(join(net, '10.9.0.2'), 'dead1\r\neth0');
    assert.equal(spawnSync('mkfifo', [join(net, '10.9.0.3')]).status, 0);
    await writeFile(join(dir, 'elsewhere'), 'secret-first-line\r\neth0');
    await symlink(join(dir, 'elsewhere'), join(net, '10.9.0.4'));
    await mkdir(join(net, '10.9.0.5'));
    await writeFile(join(net, '10.9.0.6'), `big\r\neth1\r\n${'x'.repeat(8 << 20)}`);
    const found = await scanLeases(dir, new Set());
    assert.deepEqual(
      found.map((f) => [f.containerId, f.ip, f.ifname]),
      [
        ['dead1', '10.9.0.2', 'eth0'],
        ['big', '10.9.0.6', 'eth1'],
      ],
    );
  },
);
