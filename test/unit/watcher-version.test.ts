// The conflist version a running daemon chooses against the one install recorded
// (lifecycle/watcher.ts withVersion): a daemon that sees several runtime sockets and asks none puts
// the primary's version back over a one-runtime install's 1.1.0, but not over the runtime an
// operator named with install's --runtime-endpoint (what manyRuntimes' reason tells them to do).

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';

import { manyRuntimes, type ConflistVersionChoice } from '../../daemon/src/lifecycle/cni-version.js';
import { decideCniVersion } from '../../daemon/src/lifecycle/commands.js';
import { install } from '../../daemon/src/lifecycle/install.js';
import { readRecord } from '../../daemon/src/lifecycle/record.js';
import { PrimaryWatcher } from '../../daemon/src/lifecycle/watcher.js';
import type { RuntimeSource } from '../../daemon/src/audit/runtime.js';
import { writeJson } from '../helpers/node-tree.js';

const log = pino({ level: 'silent' });
const base = mkdtempSync(join(tmpdir(), 'stw-watch-ver-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;

/** containerd 2.0.1 answering Version: 1.1.0. */
const containerd2: RuntimeSource = {
  listSandboxes: () => Promise.resolve(null),
  version: () =>
    Promise.resolve({ name: 'containerd', version: 'v2.0.1', endpoint: '/run/containerd/containerd.sock' }),
  info: () => ({}) as ReturnType<RuntimeSource['info']>,
  close: () => undefined,
};

/** A node installed with `choice`, and a running daemon's watcher over it. */
async function node(choice: ConflistVersionChoice) {
  const root = join(base, `n${n++}`);
  const t = { confDir: join(root, 'net.d'), binDir: join(root, 'bin'), stateDir: join(root, 'state') };
  mkdirSync(t.confDir, { recursive: true });
  writeJson(join(t.confDir, '10-podnet.conflist'), {
    cniVersion: '1.0.0',
    name: 'podnet',
    plugins: [{ type: 'bridge' }],
  });
  writeFileSync(join(root, 'steward-src'), '#!/bin/sh\n');
  const socket = join(root, 'd.sock');
  await install({
    cniBinDir: t.binDir,
    cniConfDir: t.confDir,
    stateDir: t.stateDir,
    shim: join(root, 'steward-src'),
    socket,
    spoolDir: join(t.stateDir, 'spool'),
    force: false,
    log,
    cniVersion: choice,
  });
  const w = new PrimaryWatcher({ confDir: t.confDir, stateDir: t.stateDir, socket, log });
  const written = () => JSON.parse(readFileSync(join(t.confDir, '00-steward.conflist'), 'utf8')).cniVersion as string;
  return { t, w, written };
}

describe("the running daemon's conflist version against install's", () => {
  const several = manyRuntimes(['/run/containerd/containerd.sock', '/var/run/crio/crio.sock']);

  it("install's --runtime-endpoint choice stands against a daemon that sees several sockets", async () => {
    const byEndpoint = await decideCniVersion(
      'auto',
      'unix:///run/containerd/containerd.sock',
      log,
      containerd2,
      100,
      [],
    );
    assert.equal(byEndpoint.endpointGiven, true, 'the record says the operator named the runtime');
    const { t, w, written } = await node(byEndpoint);
    w.scan();
    assert.equal(written(), '1.1.0');
    w.chooseVersion(several);
    assert.equal(written(), '1.1.0', 'not put back at the primary’s');
    assert.equal(readRecord(t.stateDir)?.cniVersion?.endpointGiven, true);
  });

  it('a one-runtime install (no endpoint named) is put back at the primary’s once several sockets exist', async () => {
    const asked = await decideCniVersion('auto', undefined, log, containerd2, 100, []);
    assert.equal(asked.version, '1.1.0');
    assert.equal(asked.endpointGiven, undefined);
    const { t, w, written } = await node(asked);
    w.scan();
    assert.equal(written(), '1.1.0');
    w.chooseVersion(several);
    assert.equal(written(), '1.0.0');
    assert.deepEqual(readRecord(t.stateDir)?.cniVersion?.runtimeSockets, several.runtimeSockets);
  });

  it('the named runtime answering again (not several sockets) is still applied', async () => {
    const byEndpoint = await decideCniVersion(
      'auto',
      'unix:///run/containerd/containerd.sock',
      log,
      containerd2,
      100,
      [],
    );
    const { w, written } = await node(byEndpoint);
    w.scan();
    const downgraded = await decideCniVersion(
      'auto',
      'unix:///run/containerd/containerd.sock',
      log,
      {
        ...containerd2,
        version: () =>
          Promise.resolve({ name: 'containerd', version: 'v1.7.20', endpoint: '/run/containerd/containerd.sock' }),
      },
      100,
      [],
    );
    w.chooseVersion(downgraded);
    assert.equal(written(), '1.0.0', 'a runtime downgraded below 1.1.0 gets the primary’s version back');
  });
});

describe('why the watcher is not ready', () => {
  it('is the reason it logged, until it is ready: no install record, then installed', async () => {
    const root = join(base, `why${n++}`);
    const confDir = join(root, 'net.d');
    mkdirSync(confDir, { recursive: true });
    const w = new PrimaryWatcher({ confDir, stateDir: join(root, 'state'), socket: join(root, 'd.sock'), log });
    assert.equal(w.problem(), 'not ready: the CNI conf dir has not been checked yet');
    w.scan();
    assert.equal(w.ready(), false);
    assert.equal(w.problem(), 'not ready: no install record; run `stewardd install` first');

    const choice = await decideCniVersion('auto', 'unix:///run/containerd/containerd.sock', log, containerd2, 100, []);
    const installed = (await node(choice)).w;
    installed.scan();
    assert.equal(installed.ready(), true);
    assert.equal(installed.problem(), undefined);
  });
});
