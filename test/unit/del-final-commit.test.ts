// A runtime DEL answered before its final journal commit (EngineContext.answerBeforeFinalCommit, on
// in the daemon): the commit follows inside the container's queue slot, so nothing queued after the
// DEL (an ADD, a repeated DEL) sees the attachment half torn down, and no plugin is DELed twice.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import type { CniRequestBody } from '@cni-steward/shared';
import { Engine } from '../../daemon/src/engine/engine.js';
import type { PluginCall } from '../../daemon/src/plugins/executor.js';
import { Metrics } from '../../daemon/src/metrics.js';
import { Store } from '../../daemon/src/store/store.js';

const conf = {
  cniVersion: '1.0.0',
  name: 'net',
  type: 'steward',
  delegates: [{ name: 'pod', cniVersion: '1.0.0', plugins: [{ type: 'one' }, { type: 'two' }] }],
};

function req(command: string, containerId: string): CniRequestBody {
  return {
    env: { command: command as never, containerId, netns: '/proc/self/ns/net', ifname: 'eth0', args: '', path: '/x' },
    config: conf,
  };
}

function setup() {
  const store = new Store(':memory:');
  const calls: string[] = [];
  const run = async (c: PluginCall): Promise<unknown> => {
    calls.push(`${c.command} ${c.type} ${c.containerId}`);
    return c.command === 'ADD' ? { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [] } : undefined;
  };
  const engine = new Engine({
    store,
    run,
    locate: (t) => `/fake/${t}`,
    log: pino({ level: 'silent' }),
    metrics: new Metrics(store),
    bootId: 'b',
    maxParallel: 4,
    delPolicy: 'defer',
    retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 5, maxAgeMs: 3_600_000 },
    answerBeforeFinalCommit: true,
  });
  const state = (cid: string) => store.currentAttachment({ containerId: cid, network: 'net', ifname: 'eth0' })!;
  return { store, engine, calls, state };
}

describe('DEL answered before its final commit', () => {
  test('the answer comes with the last step still deleting; the commit follows right after', async () => {
    const { store, engine, state } = setup();
    await engine.handle(req('ADD', 'c1'));
    assert.equal(await engine.handle(req('DEL', 'c1')), '');
    const a = state('c1');
    assert.equal(a.state, 'deleting');
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.state),
      ['deleting', 'deleted'],
    );
    await new Promise((r) => setImmediate(r));
    assert.equal(state('c1').state, 'deleted');
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.state),
      ['deleted', 'deleted'],
    );
  });

  test('an ADD and a repeated DEL queued behind it see the committed teardown: each plugin DELed once', async () => {
    const { engine, calls, state } = setup();
    await engine.handle(req('ADD', 'c2'));
    const first = engine.handle(req('DEL', 'c2'));
    const again = first.then(() => engine.handle(req('DEL', 'c2')));
    const add = first.then(() => engine.handle(req('ADD', 'c2')));
    assert.equal(await first, '');
    assert.equal(await again, '');
    await add;
    assert.deepEqual(
      calls.filter((c) => c.startsWith('DEL ')),
      ['DEL two c2', 'DEL one c2'],
    );
    assert.equal(state('c2').state, 'added');
  });
});
