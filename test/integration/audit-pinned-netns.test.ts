// The node's proof finds a network namespace wherever it is mounted (issue 38). A "plain pod" that never
// went through steward: a network namespace with an address on its eth0 (a veth whose both ends are in
// it), no process inside, pinned by a bind mount under a directory of this test's own (as rootless
// podman pins them under /run/user/UID/netns, docker under /var/run/docker/netns) and not under
// /run/netns; a runtime that does not list it; its host-local lease hours old. `stewardd audit
// --release` and the periodic release keep the lease while the mount stands, and release it once the
// mount is gone. A namespace mounted only inside another mount namespace (a process of `unshare
// --mount` holds it, at a path that does not exist in stewardd's own) is found through
// /proc/PID/root of that process. Every netns, mount, process and dir is removed at close.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { TestEnv, sh } from '../helpers/env.js';
import { stewardd } from '../helpers/node-tree.js';

const env = new TestEnv('audit-pinned');
after(() => env.close());

const HOURS = 3 * 3600;
let pods = 0;

interface Report {
  orphans: Array<{ kind: string; containerId: string; released: boolean; path: string }>;
  runtime: { distrusted?: string };
  node?: { namespaces: number; unread: string[] } | { error: string };
}

function quiet(cmd: string, args: string[]): void {
  try {
    sh(cmd, args);
  } catch {
    /* already gone */
  }
}

/**
 * A plain pod: a network namespace made with `ip netns add` holding `ip` on its eth0, and its
 * host-local lease in `dataDir/net`, hours old. Returns the namespace's name under /run/netns (still
 * there: pin it elsewhere, then remove that entry) and the lease's path.
 */
function plainPod(dataDir: string, net: string, cid: string, ip: string): { name: string; lease: string } {
  const name = `stw-${env.tag}-p${(pods++).toString(36)}`;
  sh('ip', ['netns', 'add', name]);
  env.defer(() => quiet('ip', ['netns', 'del', name]));
  sh('ip', ['-n', name, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0']);
  sh('ip', ['-n', name, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
  for (const l of ['eth0', 'peer0', 'lo']) sh('ip', ['-n', name, 'link', 'set', l, 'up']);
  const dir = join(dataDir, net);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'lock'), '');
  const lease = join(dir, ip);
  writeFileSync(lease, `${cid}\r\neth0`);
  const t = (Date.now() - HOURS * 1000) / 1000;
  utimesSync(lease, t, t);
  return { name, lease };
}

/** Bind-mounts /run/netns/`name` on `dir`/`name`, then removes the /run/netns entry: only that mount pins it. */
function pinUnder(dir: string, name: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, '');
  sh('mount', ['--bind', `/run/netns/${name}`, path]);
  env.defer(() => quiet('umount', ['-l', path]));
  sh('ip', ['netns', 'del', name]);
  assert.ok(!existsSync(`/run/netns/${name}`));
  return path;
}

/** The IPv4 addresses on eth0 of the namespace mounted at `path`, read inside it. */
function addressesAt(path: string): string[] {
  const out = sh('nsenter', [`--net=${path}`, 'ip', '-j', '-4', 'addr', 'show', 'eth0']);
  return (JSON.parse(out) as Array<{ addr_info: Array<{ local: string }> }>).flatMap((l) =>
    l.addr_info.map((a) => a.local),
  );
}

/**
 * The pod's sandbox removed, as `ip netns del` removes one: its mount undone, then the file unlinked,
 * which detaches any copy of the mount a mount namespace made meanwhile (an `unshare --mount` or `ip
 * netns exec` of another test, whose private copy would otherwise keep the namespace alive).
 */
function unpin(path: string): void {
  sh('umount', [path]);
  rmSync(path);
  assert.ok(!mountedAnywhere(path), `${path} is still mounted in some mount namespace`);
}

/** Whether any mount namespace's mount table names `path` (what pinned the namespace is gone when none does). */
function mountedAnywhere(path: string): boolean {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .some((pid) => {
      try {
        return readFileSync(`/proc/${pid}/mountinfo`, 'utf8').includes(` ${path} `);
      } catch {
        return false; // exited meanwhile
      }
    });
}

/** A daemon auditing only the leases under `dataDir`, asking a runtime that lists no sandbox. */
async function auditDaemon(name: string, dataDir: string, extra: string[] = []): Promise<Daemon> {
  const sock = join(env.dir, `${name}-cri.sock`);
  await fakeRuntime(env, sock, []);
  const d = new Daemon(env, {
    name,
    args: [
      ...FAST_RETRY,
      '--runtime-endpoint',
      `unix://${sock}`,
      '--audit-lease-dir',
      dataDir,
      '--audit-cache-dir',
      join(env.dir, 'no-cache'),
      '--audit-portmap-network',
      `stw-pinned-none-${process.pid}`,
      ...extra,
    ],
  });
  await d.start();
  return d;
}

/** One `audit --release` pass; `code` is its exit: 5 when the runtime's list was not trusted, 0 when it released. */
async function auditRelease(d: Daemon, code: 0 | 5): Promise<Report> {
  const r = await stewardd(['audit', '--release', '--grace', '15m', '-o', 'json', '--socket', d.socket]);
  assert.equal(r.code, code, r.stderr);
  return JSON.parse(r.stdout) as Report;
}

/** The pass kept `cid`'s lease: no orphan of it, the file still there, and the runtime's empty list not believed. */
function kept(body: Report, cid: string, lease: string, why: string): void {
  assert.ok(!body.orphans.some((o) => o.containerId === cid), `${why}: its address is on an interface, so no orphan`);
  assert.ok(existsSync(lease), `${why}: the lease stays`);
  assert.match(body.runtime.distrusted ?? '', /1 container\(s\) the runtime does not list still hold an address/);
}

/** The pass released `cid`'s lease through host-local. */
function released(body: Report, cid: string, lease: string): void {
  assert.deepEqual(
    body.orphans.filter((o) => o.containerId === cid).map((o) => [o.kind, o.released]),
    [['lease', true]],
    JSON.stringify({ node: body.node, runtime: body.runtime }),
  );
  assert.ok(!existsSync(lease), "host-local's DEL freed the lease");
}

/** A subnet base (a.b.c) of env.subnet(). */
const base = () => env.subnet().split('.').slice(0, 3).join('.');

describe("the node's proof: a network namespace only a mount outside /run/netns pins", () => {
  it('stewardd audit --release keeps the lease of a plain pod pinned under another directory; unmounted, releases it', async () => {
    const dataDir = join(env.dir, 'oneshot');
    const cid = '5a'.repeat(32);
    const ip = `${base()}.7`;
    const pod = plainPod(dataDir, 'pinnednet', cid, ip);
    const path = pinUnder(join(env.dir, 'pinned'), pod.name);
    assert.deepEqual(addressesAt(path), [ip], 'the plain pod holds its address, pinned only there');
    const d = await auditDaemon('oneshot', dataDir);

    kept(await auditRelease(d, 5), cid, pod.lease, 'pinned under a directory of its own');
    kept(await auditRelease(d, 5), cid, pod.lease, 'a second pass');

    // The pod's sandbox removed: its mount gone, nothing holds the namespace any more.
    unpin(path);
    released(await auditRelease(d, 0), cid, pod.lease);
    await d.stop();
  });

  it('a namespace mounted only inside another mount namespace is read through /proc/PID/root of its process', async () => {
    const dataDir = join(env.dir, 'other-mntns');
    const cid = '6b'.repeat(32);
    const ip = `${base()}.8`;
    const pod = plainPod(dataDir, 'othernet', cid, ip);
    // A private tmpfs over `hidden` in the child's mount namespace, the namespace bind-mounted on a
    // file in it: seen from stewardd's mount namespace, `hidden` is an empty directory.
    const hidden = join(env.dir, 'hidden');
    mkdirSync(hidden);
    const inner = join(hidden, pod.name);
    const script = [
      'set -e',
      `mount -t tmpfs stw-hidden ${hidden}`,
      `touch ${inner}`,
      `mount --bind /run/netns/${pod.name} ${inner}`,
      `umount /run/netns/${pod.name}`,
      'echo ready',
      'exec sleep 600',
    ].join('\n');
    const holder = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((r) => holder.once('exit', () => r()));
    env.defer(async () => {
      holder.kill('SIGKILL');
      await exited;
    });
    let err = '';
    holder.stderr.on('data', (b: Buffer) => (err += b.toString()));
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', (b: Buffer) => {
        if (b.toString().includes('ready')) resolve();
      });
      holder.once('exit', (code) => reject(new Error(`unshare exited ${code}: ${err}`)));
    });
    sh('ip', ['netns', 'del', pod.name]);
    assert.ok(!existsSync(`/run/netns/${pod.name}`));
    assert.ok(!existsSync(inner), "the mount point is not there in stewardd's own mount namespace");
    const through = `/proc/${holder.pid}/root${inner}`;
    assert.deepEqual(
      addressesAt(through),
      [ip],
      'the plain pod holds its address, pinned only in that mount namespace',
    );
    const d = await auditDaemon('other-mntns', dataDir);

    kept(await auditRelease(d, 5), cid, pod.lease, 'pinned in another mount namespace');

    // Its holder gone, the mount namespace goes, and with it the last mount of the network namespace.
    holder.kill('SIGKILL');
    await exited;
    released(await auditRelease(d, 0), cid, pod.lease);
    await d.stop();
  });

  it('the periodic release (stewardd run --audit-interval --audit-release) keeps it while pinned, releases it once unmounted', async () => {
    const dataDir = join(env.dir, 'periodic');
    const cid = '7c'.repeat(32);
    const ip = `${base()}.9`;
    const pod = plainPod(dataDir, 'periodicnet', cid, ip);
    const path = pinUnder(join(env.dir, 'pinned-periodic'), pod.name);
    const d = await auditDaemon('periodic', dataDir, [
      '--audit-interval',
      '1s',
      '--audit-release',
      '--audit-grace',
      '15m',
    ]);
    const metrics = async () => (await d.get('/metrics')).text;
    const log = () => readFileSync(d.logFile, 'utf8');
    // Each pass that sees the pod's address while the runtime lists nothing says so.
    const passes = () => (log().match(/the runtime's answer contradicts the node/g) ?? []).length;
    await d.waitFor(
      'three periodic passes that see the pod',
      () => passes() >= 3 || /released an orphan/.test(log()),
      30_000,
    );
    assert.doesNotMatch(log(), /audit: released an orphan/);
    assert.ok(existsSync(pod.lease), 'three passes kept the lease of a pod whose namespace is mounted');
    assert.match(await metrics(), /^steward_audit_released_total\{kind="lease"\} 0$/m);

    unpin(path);
    await d.waitFor(
      'the periodic pass to release the lease',
      async () => /^steward_audit_released_total\{kind="lease"\} 1$/m.test(await metrics()),
      30_000,
    );
    assert.ok(!existsSync(pod.lease), "host-local's DEL freed the lease");
    await d.stop();
  });
});
