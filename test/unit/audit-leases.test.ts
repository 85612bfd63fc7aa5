// host-local lease files read as host-local writes them (IP-named files holding `<id>\r\n<ifname>`),
// in a temp dataDir: the lock and last_reserved_ip files are not leases, an old id-only file still is.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseLease, releaseLease, scanLeases } from '../../daemon/src/audit/leases.js';
import { readPlainFile } from '../../daemon/src/audit/files.js';
import { readdirSync } from 'node:fs';

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

test('parseLease: a bare \\n between id and ifname, and spaces around either, as host-local versions wrote them', () => {
  assert.deepEqual(parseLease('abc\neth1'), { containerId: 'abc', ifname: 'eth1' });
  assert.deepEqual(parseLease(' abc \r\n eth0 \r\n'), { containerId: 'abc', ifname: 'eth0' });
  assert.equal(parseLease('  \r\neth0'), null);
});

test('scanLeases: an empty lease file, a stray file beside the networks and a lease over 4 KiB are handled', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'net'));
  await writeFile(join(dir, 'net', '10.9.0.2'), ''); // being written: no id yet
  await writeFile(join(dir, 'net', '10.9.0.3'), `${'x'.repeat(5000)}\r\neth0`);
  await writeFile(join(dir, 'stray'), 'not a network');
  const locked: string[] = [];
  const found = await scanLeases(dir, new Set(), async (file) => {
    locked.push(file);
    return () => undefined;
  });
  assert.deepEqual(
    found.map((f) => [f.ip, f.containerId.length, f.ifname]),
    [['10.9.0.3', 4096, '']],
    "only a lease's first 4 KiB are read",
  );
  assert.deepEqual(locked, [join(dir, 'net', 'lock')], 'no lock taken for what is not a network directory');
});

test('scanLeases takes the lock once per 256 lease files, and reads each file once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [net, n] of [
    ['a256', 256],
    ['b257', 257],
  ] as const) {
    await mkdir(join(dir, net));
    for (let i = 0; i < n; i++)
      await writeFile(join(dir, net, `10.${net === 'a256' ? 1 : 2}.${i >> 8}.${i & 255}`), `c${i}`);
  }
  const locks: string[] = [];
  const fds = () => readdirSync('/proc/self/fd').length;
  const before = fds();
  const found = await scanLeases(dir, new Set(), async (file) => {
    locks.push(file.split('/').at(-2) ?? '');
    return () => undefined;
  });
  assert.ok(fds() <= before + 2, `every lease file read is closed again (${before} fds before, ${fds()} after)`);
  assert.deepEqual(locks, ['a256', 'b257', 'b257']);
  assert.equal(found.length, 513);
  assert.equal(new Set(found.map((f) => f.path)).size, 513, 'no lease read twice');
  const paths = found.map((f) => f.path);
  assert.deepEqual(
    paths,
    [...paths].sort((a, b) => a.localeCompare(b)),
    'in path order',
  );
});

test('scanLeases: a lock that cannot be had without anyone to tell skips the network; a network removed meanwhile holds nothing', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'busy'));
  await writeFile(join(dir, 'busy', '10.9.0.2'), 'c1\r\neth0');
  await mkdir(join(dir, 'gone'));
  await writeFile(join(dir, 'gone', '10.9.0.3'), 'c2\r\neth0');
  const found = await scanLeases(dir, new Set(), async (file) => {
    if (file.includes('/busy/')) throw new Error('held');
    await rm(join(dir, 'gone'), { recursive: true }); // its network deleted while the lock was waited for
    return () => undefined;
  });
  assert.deepEqual(found, []);
});

test("releaseLease: host-local's DEL with the lease's id, its ifname (eth0 for the old format) and the CNI path; nothing when gone", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'net'));
  await writeFile(join(dir, 'net', '10.9.0.2'), 'old');
  const [f] = await scanLeases(dir, new Set());
  const calls: unknown[] = [];
  const run = async (call: unknown) => {
    calls.push(call);
    return undefined;
  };
  assert.equal(await releaseLease(f!, run, '/opt/cni/bin'), true);
  assert.deepEqual(calls, [
    {
      command: 'DEL',
      type: 'host-local',
      containerId: 'old',
      netns: '',
      ifname: 'eth0',
      args: '',
      cniPath: '/opt/cni/bin',
      stdin: {
        cniVersion: '0.4.0',
        name: 'net',
        type: 'host-local',
        ipam: { type: 'host-local', dataDir: dir, ranges: [[{ subnet: '10.9.0.0/24' }]] },
      },
    },
  ]);
  await rm(join(dir, 'net', '10.9.0.2'));
  assert.equal(await releaseLease(f!, run, ''), false);
  assert.equal(calls.length, 1, 'no DEL for a lease already freed');
});

test('scanLeases reports in path order across networks, upper and lower case names interleaved', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [net, ip] of [
    ['Blue', '10.2.0.2'],
    ['amber', '10.1.0.2'],
    ['cyan', '10.3.0.2'],
  ] as const) {
    await mkdir(join(dir, net));
    await writeFile(join(dir, net, ip), `c-${net}\r\neth0`);
  }
  assert.deepEqual(
    (await scanLeases(dir, new Set())).map((f) => f.network),
    ['amber', 'Blue', 'cyan'],
  );
});

test('readPlainFile: nothing for a path that cannot be opened (missing, or a symlink)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'stw-audit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'real'), 'abc');
  await symlink(join(dir, 'real'), join(dir, 'link'));
  assert.equal(await readPlainFile(join(dir, 'missing'), 10), null);
  assert.equal(await readPlainFile(join(dir, 'link'), 10), null);
  assert.equal((await readPlainFile(join(dir, 'real'), 2))?.text, 'ab');
});
