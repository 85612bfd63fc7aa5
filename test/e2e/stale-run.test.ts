// An e2e run killed before its cleanup (kill -9, a CI job cut off) leaves its files in machine-wide
// places: a conflist, the podman drop-in, the shim in /opt/cni/bin, the DaemonSet test's install. The
// next run must start from the machine as it was: a leftover drop-in made the podman suite report its
// own removal as residue, and a leftover /opt/cni/bin/steward made the ctr suite refuse to run (CI,
// 30 Nov). Here a real child sets up as the suites do and is killed -9; the next RuntimeHost must
// leave nothing of it, and the machine must end as it was before both.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { recordPath } from '../../daemon/src/lifecycle/record.js';
import { REPO, TestEnv } from '../helpers/env.js';
import { installInto } from '../helpers/node-tree.js';
import { RuntimeHost } from '../helpers/runtimes/host.js';
import { acquireMachineLock } from '../helpers/runtimes/lock.js';
import {
  CNI_CONF_DIR,
  E2E_MARK,
  NODE_E2E_MARK,
  NODE_INSTALL,
  NODE_RUN_DIR,
  NODE_STATE_DIR,
  OPT_CNI_BIN,
  listDir,
  machineDiff,
  removeIfOnlyHusks,
  restoreMachineState,
  snapshot,
  type MachineState,
} from '../helpers/runtimes/machine.js';
import { baseSkipReason, skipOrFail } from '../helpers/runtimes/skip.js';

const env = new TestEnv('e2e-stale');
const skip = skipOrFail('a killed run and the next one', baseSkipReason(['ip', 'iptables', 'sh']));

let child: ChildProcess | undefined;
let childDir: string | undefined;
let host: RuntimeHost | undefined;
let before: (MachineState & { nodeDirs: boolean[] }) | undefined;

const nodeDirs = () => [NODE_STATE_DIR, NODE_RUN_DIR].map((d) => existsSync(d));

/** Puts back what the test itself made: the dead run's temp dir, husk dirs it created first. */
function tidy(): void {
  if (childDir) rmSync(childDir, { recursive: true, force: true });
  if (!before) return;
  restoreMachineState(before);
  [NODE_STATE_DIR, NODE_RUN_DIR].forEach((d, i) => {
    if (!before!.nodeDirs[i]) removeIfOnlyHusks(d);
  });
}

after(async () => {
  if (skip) return env.close();
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  // A failure before the next run: one more RuntimeHost removes what the dead run left, as a run would.
  host ??= await RuntimeHost.create(env);
  await host.finish();
  tidy();
});

/** Runs dead-run.ts, reads its line of what it planted, then kill -9s it. */
async function killedRun(): Promise<string[]> {
  const c = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'test/helpers/runtimes/dead-run.ts')], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child = c;
  let out = '';
  let err = '';
  c.stderr!.on('data', (b: Buffer) => (err += b.toString('utf8')));
  const line = await new Promise<string>((resolve, reject) => {
    c.stdout!.on('data', (b: Buffer) => {
      out += b.toString('utf8');
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    c.on('exit', (code) => reject(new Error(`dead-run.ts exited ${code} before planting: ${err}`)));
  });
  const told = JSON.parse(line) as { dir: string; planted: string[] };
  childDir = told.dir;
  const exited = new Promise((r) => c.on('exit', r));
  c.kill('SIGKILL');
  await exited;
  return told.planted;
}

describe('an e2e run killed -9 before its cleanup', { skip }, () => {
  it('the next run removes its conflist, drop-in, shim link and node install before its snapshot, and the machine ends as before both', async () => {
    const release = await acquireMachineLock();
    try {
      before = { ...snapshot(), nodeDirs: nodeDirs() };
    } finally {
      release();
    }
    const planted = await killedRun();
    assert.ok(planted.length >= 3, `planted: ${planted.join(', ')}`);
    assert.deepEqual(
      planted.filter((p) => !existsSync(p)),
      [],
      'the dead run left its files behind',
    );

    host = await RuntimeHost.create(env);
    assert.deepEqual(
      planted.filter((p) => existsSync(p)),
      [],
      "nothing of the dead run's is left once the next run has set up",
    );
    assert.deepEqual(await host.finish(), [], 'the next run itself leaves the machine as it found it');
    tidy();
    assert.deepEqual(machineDiff(before, snapshot()), [], 'the machine is as it was before the dead run');
    assert.deepEqual(nodeDirs(), before.nodeDirs, '/var/lib/steward and /run/steward as before');
  });

  it("a node's own install is left alone, even when its watcher wrapped a test conflist, while its daemon listens", async () => {
    if ([...NODE_INSTALL, NODE_E2E_MARK].some((p) => existsSync(p))) return; // a real one: nothing to plant
    const nodeEnv = new TestEnv('e2e-stale-node'); // the first case's env is closed by now
    const release = await acquireMachineLock();
    const listener = createServer();
    const socket = join(nodeEnv.dir, 'node-stewardd.sock');
    await new Promise<void>((r) => listener.listen(socket, r));
    const primary = join(CNI_CONF_DIR, `10-${E2E_MARK}-node-primary.conflist`);
    const made = [OPT_CNI_BIN, '/opt/cni', NODE_STATE_DIR].filter((d) => !existsSync(d));
    try {
      mkdirSync(CNI_CONF_DIR, { recursive: true });
      writeFileSync(
        primary,
        JSON.stringify({ cniVersion: '1.0.0', name: 'nodeprimary', plugins: [{ type: 'loopback' }] }),
      );
      const tree = { root: '/', confDir: CNI_CONF_DIR, binDir: OPT_CNI_BIN, stateDir: NODE_STATE_DIR };
      const r = await installInto(tree, socket);
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        readFileSync(recordPath(NODE_STATE_DIR), 'utf8'),
        new RegExp(`"primary": "10-${E2E_MARK}-node-primary`),
      );
    } finally {
      release();
    }
    try {
      await RuntimeHost.create(nodeEnv).then((h) => h.finish());
      assert.deepEqual(
        NODE_INSTALL.filter((p) => !existsSync(p)),
        [],
        "the sweep took a live node's install for a dead test run's",
      );
    } finally {
      await new Promise((r) => listener.close(r));
      await nodeEnv.close();
      for (const p of [...NODE_INSTALL, primary]) rmSync(p, { force: true });
      for (const f of listDir(NODE_STATE_DIR) ?? []) rmSync(join(NODE_STATE_DIR, f), { recursive: true, force: true });
      for (const d of made) removeIfOnlyHusks(d);
    }
  });
});
