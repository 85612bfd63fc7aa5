// The shim dist/steward (Go, static) on a host with no Node.js at all: a real ADD/DEL with bridge + host-local in a netns, and the
// daemon-unreachable paths that depend on its transport (code 11 for ADD, spooled DEL).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { execWithoutNode } from '../helpers/no-node.js';
import { SHIM_EXE } from '../helpers/node-tree.js';
import { cniEnv } from '../helpers/shim.js';

const env = new TestEnv('exe');
const daemon = new Daemon(env);
const emptyPath = join(env.dir, 'empty-path');
before(async () => {
  mkdirSync(emptyPath);
  await daemon.start();
});
after(() => env.close());

function run(call: Parameters<typeof cniEnv>[0], conf: unknown) {
  const e = cniEnv(call);
  delete e.PATH;
  return execWithoutNode(SHIM_EXE, e, JSON.stringify(conf), emptyPath);
}

describe('dist/steward with no Node.js on the host', () => {
  const dataDir = join(env.dir, 'ipam');
  const conf = () =>
    stewardConf(daemon.socket, '1.0.0', [delegate('exenet', '1.0.0', [bridgePlugin({ bridge, subnet, dataDir })])]);
  const bridge = env.bridge();
  const subnet = env.subnet();

  it('answers VERSION locally', async () => {
    const r = await run({ command: 'VERSION' }, { cniVersion: '1.0.0' });
    assert.equal(r.code, 0);
    assert.deepEqual(r.json.supportedVersions, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });

  it('runs a real ADD and DEL through the daemon', async () => {
    const netns = env.netns();
    const add = await run({ command: 'ADD', containerId: 'exe-1', netns }, conf());
    assert.equal(add.code, 0, add.stdout);
    assert.equal(linkExists(netns, 'eth0'), true);
    assert.deepEqual(leases(dataDir, 'exenet'), [add.json.ips[0].address.split('/')[0]]);
    const del = await run({ command: 'DEL', containerId: 'exe-1', netns }, conf());
    assert.equal(del.code, 0, del.stdout);
    assert.equal(linkExists(netns, 'eth0'), false);
    assert.deepEqual(leases(dataDir, 'exenet'), []);
  });

  it('with the daemon down: ADD gets code 11 at once, DEL is spooled and succeeds', async () => {
    const spool = join(env.dir, 'spool-exe');
    const down = { ...conf(), socket: join(env.dir, 'nobody-home.sock'), spoolDir: spool };
    const netns = env.netns();
    const add = await run({ command: 'ADD', containerId: 'exe-2', netns }, down);
    assert.equal(add.code, 1);
    assert.equal(add.json.code, 11);
    assert.match(add.json.msg, /unreachable/);
    const del = await run({ command: 'DEL', containerId: 'exe-2', netns }, down);
    assert.equal(del.code, 0, del.stdout);
    assert.equal(readdirSync(spool).filter((f) => f.endsWith('.json')).length, 1);
  });

  it('passes a daemon CNI error through unchanged', async () => {
    const r = await run({ command: 'CHECK', containerId: 'never-added', netns: env.netns() }, conf());
    assert.equal(r.code, 1);
    assert.equal(r.json.code, 3);
  });
});
