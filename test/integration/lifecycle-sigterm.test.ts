// SIGTERM: uninstall on `kubectl delete`, never on a rolling update. The HTTPS server here is a
// STAND-IN FOR THE KUBERNETES API SERVER (test/helpers/fake-apiserver.ts): a CA generated in the
// test, a service-account token file, and the two answers that matter — the DaemonSet is there,
// or it is gone / has a deletionTimestamp. The daemon, install and files are all real.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { FakeApiServer, type DaemonSetAnswer } from '../helpers/fake-apiserver.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { installInto, nodeTree, snapshot, writeJson, type NodeTree } from '../helpers/node-tree.js';
import { shim } from '../helpers/shim.js';

interface Outcome {
  tree: NodeTree;
  original: Record<string, string>;
  log: string;
  exitCode: number | null;
  api: FakeApiServer;
}

const envs: TestEnv[] = [];
after(async () => {
  for (const e of envs) await e.close();
});

/**
 * A node tree with a bridge primary, a stand-in API server and an in-cluster daemon (not started),
 * steward installed; `original` is the tree before install.
 */
async function inClusterNode(
  name: string,
  o: { extraArgs?: string[]; pathPrefix?: string; podName?: string } = {},
): Promise<{ env: TestEnv; api: FakeApiServer; daemon: Daemon; tree: NodeTree; original: Record<string, string> }> {
  const env = new TestEnv(name);
  envs.push(env);
  const api = new FakeApiServer(env.dir, 'steward-system', 'steward');
  api.pathPrefix = o.pathPrefix ?? '';
  await api.start();
  env.defer(() => api.close());
  const confDir = join(env.dir, 'node/etc/cni/net.d');
  const daemon = new Daemon(env, {
    args: ['--cni-conf-dir', confDir, '--drain-timeout', '1', ...api.daemonArgs(), ...(o.extraArgs ?? [])],
    ...(o.podName !== undefined ? { env: { POD_NAME: o.podName } } : {}),
  });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  writeJson(join(tree.confDir, '10-podnet.conflist'), {
    cniVersion: '1.0.0',
    name: 'podnet',
    plugins: [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam') })],
  });
  const original = snapshot(tree.root);
  const inst = await installInto(tree, daemon.socket);
  assert.equal(inst.code, 0, inst.stderr);
  return { env, api, daemon, tree, original };
}

/** Install on a fresh node tree, run the daemon in-cluster, optionally leave a teardown pending, then SIGTERM. */
async function sigtermWith(
  answer: DaemonSetAnswer | 'unreachable',
  opts: {
    extraArgs?: string[];
    pendingTeardown?: boolean;
    pathPrefix?: string;
    podName?: string;
    /** install.json's text, written just before SIGTERM (one uninstall cannot read). */
    recordBeforeTerm?: string;
  } = {},
): Promise<Outcome> {
  const { env, api, daemon, tree, original } = await inClusterNode(`term-${answer}`, opts);
  api.answer = answer === 'unreachable' ? 'present' : answer;
  await daemon.start();
  if (opts.pendingTeardown) {
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('stuck', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { failDelAlways: true })]),
    ]);
    const call = { containerId: 'stuck-1', netns: env.netns() };
    assert.equal((await shim({ command: 'ADD', ...call }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', ...call }, conf)).code, 0);
    assert.equal((await daemon.get('/v1/teardowns')).json.pending.length, 1);
  }
  if (answer === 'unreachable') await api.close();
  if (opts.recordBeforeTerm !== undefined) writeFileSync(join(tree.stateDir, 'install.json'), opts.recordBeforeTerm);
  const exitCode = await daemon.stop();
  return { tree, original, log: readFileSync(daemon.logFile, 'utf8'), exitCode, api };
}

function installed(t: NodeTree): boolean {
  return (
    existsSync(join(t.confDir, '00-steward.conflist')) &&
    existsSync(join(t.binDir, 'steward')) &&
    existsSync(join(t.stateDir, 'install.json'))
  );
}

describe('SIGTERM in a cluster (against a stand-in API server)', () => {
  it('DaemonSet still there (rolling update): everything stays in place', async () => {
    const o = await sigtermWith('present');
    assert.equal(o.exitCode, 0);
    assert.ok(installed(o.tree));
    assert.deepEqual(o.api.requests, [
      { path: '/apis/apps/v1/namespaces/steward-system/daemonsets/steward', authorized: true },
    ]);
    assert.match(o.log, /DaemonSet steward-system\/steward still exists/);
  });

  it('DaemonSet gone (404): the node is left byte for byte as before install, state dir removed', async () => {
    const o = await sigtermWith('absent');
    assert.equal(o.exitCode, 0);
    assert.deepEqual(snapshot(o.tree.root), o.original);
    assert.equal(existsSync(o.tree.stateDir), false);
    assert.match(o.log, /DaemonSet steward-system\/steward no longer exists/);
  });

  it('DaemonSet being deleted: uninstalls after draining, reports the teardown left, keeps the state for it', async () => {
    const o = await sigtermWith('deleting', { pendingTeardown: true });
    assert.equal(o.exitCode, 0);
    assert.deepEqual(snapshot(o.tree.root), o.original);
    assert.match(o.log, /is being deleted/);
    const left = o.log.split('\n').filter((l) => l.includes('teardowns still pending at uninstall'));
    assert.equal(left.length, 1, o.log);
    const entry = JSON.parse(left[0]!);
    assert.equal(entry.count, 1);
    assert.deepEqual(entry.containers, ['stuck-1']);
    // The database stays so a reinstall resumes the teardown; only the install record is gone.
    assert.ok(existsSync(join(o.tree.stateDir, 'steward.db')));
    assert.equal(existsSync(join(o.tree.stateDir, 'install.json')), false);
  });

  it('--k8s-api with a path (a proxy serving several clusters): asked under it, so a deleted DaemonSet uninstalls', async () => {
    const o = await sigtermWith('absent', { pathPrefix: '/k8s/clusters/c-1', podName: 'steward-x7k2p' });
    assert.deepEqual(o.api.requests, [
      { path: '/k8s/clusters/c-1/apis/apps/v1/namespaces/steward-system/daemonsets/steward', authorized: true },
    ]);
    assert.deepEqual(snapshot(o.tree.root), o.original);
    assert.match(o.log, /DaemonSet steward-system\/steward no longer exists/);
  });

  it("a 404 that is not the API server's NotFound (a proxy's): everything stays, the log says why", async () => {
    const o = await sigtermWith('proxy-404');
    assert.equal(o.exitCode, 0);
    assert.ok(installed(o.tree));
    assert.match(o.log, /HTTP 404 that is not the API server's NotFound for daemonsets\/steward: 404 page not found/);
  });

  it('a 404 for a DaemonSet this pod is not named after (the label renamed apart from it): everything stays', async () => {
    const o = await sigtermWith('absent', { podName: 'prod-steward-x7k2p' });
    assert.equal(o.exitCode, 0);
    assert.ok(installed(o.tree));
    assert.match(o.log, /this pod \(prod-steward-x7k2p\) is not one of its pods/);
  });

  it('DaemonSet gone but the uninstall fails (an install record it cannot read): 00-steward.conflist is still moved aside', async () => {
    const o = await sigtermWith('absent', { recordBeforeTerm: '{"version":2}\n' });
    assert.equal(o.exitCode, 0);
    assert.match(o.log, /uninstall on SIGTERM failed/);
    assert.match(o.log, /00-steward.conflist was only moved aside/);
    assert.equal(existsSync(join(o.tree.confDir, '00-steward.conflist')), false, 'no config names steward');
    assert.equal(readdirSync(o.tree.confDir).filter((f) => f.startsWith('00-steward.conflist.edited-')).length, 1);
    assert.ok(existsSync(join(o.tree.confDir, '10-podnet.conflist')), 'the primary untouched');
  });

  it('API server unreachable: everything stays in place and the log says why', async () => {
    const o = await sigtermWith('unreachable');
    assert.equal(o.exitCode, 0);
    assert.ok(installed(o.tree));
    assert.match(o.log, /cannot tell whether DaemonSet steward-system\/steward still exists \(API unreachable/);
  });

  it('--uninstall-on-delete=never keeps everything even when the DaemonSet is gone', async () => {
    const o = await sigtermWith('absent', { extraArgs: ['--uninstall-on-delete', 'never'] });
    assert.ok(installed(o.tree));
    assert.equal(o.api.requests.length, 0);
  });
});

/** Marks the journal in `stateDir` as written by a newer release (schema 99): this build cannot start on it. */
function markJournalNewer(stateDir: string): void {
  const Sqlite = createRequire(import.meta.url)('better-sqlite3');
  const db = new Sqlite(join(stateDir, 'steward.db'));
  db.pragma('user_version = 99');
  db.close();
}

describe('SIGTERM to a stewardd that could not start (a journal from a newer release: it would crash-loop)', () => {
  /** Installs, lets a daemon make its journal, marks the journal newer than this build, starts again. */
  async function failedStartWith(answer: DaemonSetAnswer, extraArgs: string[] = []) {
    const { api, daemon, tree, original } = await inClusterNode(`failed-start-${answer}`, { extraArgs });
    api.answer = 'present'; // the first daemon's stop is a restart
    await daemon.start();
    assert.equal(await daemon.stop(), 0);
    markJournalNewer(daemon.stateDir);
    api.answer = answer;
    api.requests.length = 0;
    const exited = daemon.startExpectingExit(30_000);
    const failed = () => readFileSync(daemon.logFile, 'utf8').includes('stewardd could not start; it stays up');
    await daemon.waitFor('the failed start waiting for SIGTERM', failed, 20_000);
    daemon.send('SIGTERM');
    const { code, log } = await exited;
    return { tree, original, code, log, api };
  }

  it('the DaemonSet gone: the node is uninstalled (no conflist left to stop every new pod), exit 1', async () => {
    const o = await failedStartWith('absent');
    assert.equal(o.code, 1, o.log.slice(-2000));
    assert.match(o.log, /schema version 99, newer than this stewardd/);
    assert.match(o.log, /DaemonSet steward-system\/steward no longer exists/);
    assert.equal(existsSync(join(o.tree.confDir, '00-steward.conflist')), false, o.log.slice(-2000));
    assert.equal(existsSync(join(o.tree.binDir, 'steward')), false);
    assert.equal(o.api.requests.length, 1);
    // The journal it could not read is said and purged with the rest, as `uninstall --purge` does.
    assert.match(o.log, /pending teardowns cannot be read/);
    assert.equal(existsSync(join(o.tree.stateDir, 'steward.db')), false);
  });

  it('the DaemonSet still there (a rolling update, the crash loop itself): everything stays, exit 1', async () => {
    const o = await failedStartWith('present');
    assert.equal(o.code, 1, `exit ${o.code}: ${o.log.slice(-1500)}`);
    assert.match(o.log, /still exists/);
    assert.ok(installed(o.tree));
  });

  it('in a cluster with --uninstall-on-delete never, and for a state dir another live stewardd owns: exits at once, as before', async () => {
    const env = new TestEnv('failed-start-never');
    envs.push(env);
    const api = new FakeApiServer(env.dir, 'steward-system', 'steward');
    await api.start();
    env.defer(() => api.close());
    const live = new Daemon(env, { name: 'live', args: api.daemonArgs() });
    await live.start();
    const second = new Daemon(env, { name: 'second', stateDir: live.stateDir, args: api.daemonArgs() });
    const busy = await second.startExpectingExit(20_000);
    assert.equal(busy.code, 1);
    assert.doesNotMatch(busy.log, /it stays up/);
    assert.equal(await live.stop(), 0);
    const daemon = new Daemon(env, { args: ['--uninstall-on-delete', 'never', ...api.daemonArgs()] });
    await daemon.start();
    assert.equal(await daemon.stop(), 0);
    markJournalNewer(daemon.stateDir);
    const { code, log } = await daemon.startExpectingExit(20_000);
    assert.equal(code, 1);
    assert.doesNotMatch(log, /it stays up/);
  });
});
