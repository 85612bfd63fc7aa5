// What a CNI_NETNS names when it is a bind mount of a namespace file (how `ip netns add` and the
// runtimes pin a pod's namespace): not a link naming its kind, so the kind comes from the mountinfo
// of the mount namespace the path is in (engine/netns.ts). Without root: a child in its own user
// and mount namespace (`unshare -rm`) bind-mounts namespace files over plain files, and the test
// reaches them through /proc/<child>/root/, as stewardd reaches a pod's files through a runtime's.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { netnsIdentity, netnsProblem, teardownNetns } from '../../daemon/src/engine/netns.js';
import { skipOrFail } from '../helpers/runtimes/skip.js';

const canUnshare = spawnSync('unshare', ['-rm', 'true']).status === 0;
const skip = skipOrFail(
  'bind-mounted namespace files (unit)',
  canUnshare ? undefined : '`unshare -rm` failed: no unprivileged user namespaces here',
);

const dir = mkdtempSync(join(tmpdir(), 'steward-netns-bind-'));
const files = {
  uts: join(dir, 'uts'),
  net: join(dir, 'net'),
  spaced: join(dir, 'with space'),
  newline: join(dir, 'new\nline'),
  stacked: join(dir, 'stacked'),
  plain: join(dir, 'plain'),
};
let child: ChildProcess | undefined;
let root = '';
let cwd = '';

before(async () => {
  if (skip) return;
  for (const f of Object.values(files)) writeFileSync(f, '');
  const q = (s: string) => `'${s}'`;
  // The last mount on a path is the one it shows: "stacked" is a net namespace covered by a uts one.
  const script = [
    `mount --bind /proc/self/ns/uts ${q(files.uts)}`,
    `mount --bind /proc/self/ns/net ${q(files.net)}`,
    `mount --bind /proc/self/ns/ipc ${q(files.spaced)}`,
    `mount --bind /proc/self/ns/pid ${q(files.newline)}`,
    `mount --bind /proc/self/ns/net ${q(files.stacked)}`,
    `mount --bind /proc/self/ns/uts ${q(files.stacked)}`,
    `cd ${q(dir)}`,
    'echo ready',
    // Lives as long as this process holds its stdin: a test killed mid-way leaves nothing behind.
    'exec cat >/dev/null',
  ].join(' && ');
  const c = spawn('unshare', ['-rm', 'sh', '-c', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  child = c;
  await new Promise<void>((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`unshare exited ${code} before its mounts were made`)));
    c.stdout?.once('data', () => resolve());
  });
  root = `/proc/${c.pid}/root`;
  cwd = `/proc/${c.pid}/cwd`;
});

after(() => {
  child?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('a bind-mounted namespace file reached through /proc/<pid>/root/', { skip }, () => {
  test('another kind is refused, named by its kind; a path with a space or a newline is read through mountinfo escapes', async () => {
    assert.equal(
      await netnsProblem(`${root}${files.uts}`),
      `CNI_NETNS "${root}${files.uts}" is not a network namespace (it is the uts namespace kind)`,
    );
    assert.match((await netnsProblem(`${root}${files.spaced}`))!, /\(it is the ipc namespace kind\)$/);
    assert.match(
      (await netnsProblem(`${root}${files.newline}`))!,
      /\(it is the pid namespace kind\)$/,
      'a newline in the name',
    );
  });

  test('a network namespace is accepted, and is still the host one when it is', async () => {
    assert.equal(await netnsProblem(`${root}${files.net}`), undefined);
    // The child shares this process's network namespace: a pod never does.
    assert.equal(
      await netnsProblem(`${root}${files.net}`, '/proc/self/ns/net'),
      `CNI_NETNS "${root}${files.net}" is the host's network namespace (stewardd's own)`,
    );
  });

  test('of two mounts on one path, the last one is what the path shows', async () => {
    assert.match((await netnsProblem(`${root}${files.stacked}`))!, /\(it is the uts namespace kind\)$/);
  });

  test('the same file in this mount namespace is a plain file, not a namespace', async () => {
    assert.equal(await netnsProblem(files.uts), `CNI_NETNS "${files.uts}" is not a network namespace`);
  });

  test('a namespace file whose kind cannot be read (no mountinfo names it from here) is not refused', async () => {
    // /proc/<pid>/cwd/ is not a root: the path resolves to the child's view of it, which this mount
    // namespace's mountinfo does not list. Refused only when known to be another kind: a plugin's
    // setns then says what is wrong.
    assert.equal(await netnsProblem(`${cwd}/uts`), undefined);
  });
});

// Which namespace a stored CNI_NETNS names (engine/netns.ts netnsIdentity): a teardown passes the
// path only while it names the namespace the ADD used. A bind mount made again under the same name
// for another pod, or a /proc/<pid>/ns/net whose pid was reused, had a DEL remove that pod's
// interface. Without root: each child below has a network namespace of its own (`unshare -rmn`).

/** A child in its own user, mount and network namespaces, its namespace bound on `file`; `remount()` binds a new one there. */
async function podLike(file: string) {
  writeFileSync(file, '');
  const q = `'${file}'`;
  // On a line: bind a new network namespace over the file (after unmounting the old one).
  const script = [
    `mount --bind /proc/self/ns/net ${q}`,
    'echo ready',
    'read line',
    `umount ${q}`,
    `exec unshare -n sh -c "mount --bind /proc/self/ns/net ${q} && echo again && exec cat >/dev/null"`,
  ].join(' && ');
  const c = spawn('unshare', ['-rmn', 'sh', '-c', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = () =>
    new Promise<void>((resolve, reject) => {
      c.once('exit', (code) => reject(new Error(`unshare exited ${code}`)));
      c.stdout?.once('data', () => resolve());
    });
  await line();
  return {
    child: c,
    bound: `/proc/${c.pid}/root${file}`,
    own: `/proc/${c.pid}/ns/net`,
    remount: async () => {
      c.stdin?.write('\n');
      await line();
    },
  };
}

describe('which namespace a stored CNI_NETNS names (netnsIdentity, teardownNetns)', { skip }, () => {
  test('a bind mount made again under the same name for another namespace: the teardown passes no netns', async () => {
    const pod = await podLike(join(dir, 'reused'));
    try {
      const atAdd = netnsIdentity(pod.bound);
      assert.match(atAdd ?? '', /^\d+:\d+ ctime \d+$/);
      assert.equal(netnsIdentity(pod.bound), atAdd, 'the same mount reads the same every time');
      assert.equal(await teardownNetns(pod.bound, '/proc/self/ns/net', atAdd), pod.bound);
      await pod.remount();
      assert.equal(await netnsProblem(pod.bound), undefined, 'still a network namespace, another one');
      assert.notEqual(netnsIdentity(pod.bound), atAdd);
      assert.equal(await teardownNetns(pod.bound, '/proc/self/ns/net', atAdd), '');
      // A row from before the identity was kept: checked as before.
      assert.equal(await teardownNetns(pod.bound, '/proc/self/ns/net', null), pod.bound);
    } finally {
      pod.child.kill('SIGKILL');
    }
  });

  test("/proc/<pid>/ns/net: named by the process's start time (its inode's times change at each look), through a symlink too", async () => {
    const a = await podLike(join(dir, 'a'));
    const b = await podLike(join(dir, 'b'));
    try {
      const id = netnsIdentity(a.own);
      assert.match(id ?? '', new RegExp(`^\\d+:\\d+ pid ${a.child.pid} start \\d+$`));
      const link = join(dir, 'link-to-a');
      symlinkSync(a.own, link);
      assert.equal(netnsIdentity(link), id);
      // Reached through another process's root: its directory resolved, still that process's.
      assert.equal(netnsIdentity(`/proc/${process.pid}/root${a.own}`), id);
      assert.equal(await teardownNetns(a.own, '/proc/self/ns/net', id), a.own);
      // The pid is another process's now (here: another path and namespace under the same record).
      assert.equal(await teardownNetns(b.own, '/proc/self/ns/net', id), '');
      assert.equal(await teardownNetns(a.own, '/proc/self/ns/net', id!.replace(/start \d+$/, 'start 1')), '');
      a.child.kill('SIGKILL');
      await new Promise((r) => a.child.once('exit', r));
      assert.equal(netnsIdentity(a.own), undefined, 'gone with its process');
      assert.equal(await teardownNetns(a.own, '/proc/self/ns/net', id), '');
    } finally {
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
    }
  });
});
