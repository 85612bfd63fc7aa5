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

function setup(log = pino({ level: 'silent' })) {
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
    log,
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
  test('a final commit that fails after the answer is logged; the step stays deleting and no tombstone answers a repeat', async () => {
    const rows: Array<Record<string, unknown>> = [];
    const log = pino(
      { level: 'info', base: undefined, timestamp: false },
      { write: (t: string) => void rows.push(JSON.parse(t)) },
    );
    const { store, engine, calls, state } = setup(log);
    await engine.handle(req('ADD', 'c3'));
    const realState = store.setAttachmentState.bind(store);
    let full = true;
    store.setAttachmentState = (id, st) => {
      if (full && st === 'deleted') throw new Error('disk full');
      realState(id, st);
    };
    assert.equal(await engine.handle(req('DEL', 'c3')), '', 'answered before the commit');
    await engine.idle('c3');
    const failed = rows.filter((r) => /final journal write failed/.test(String(r.msg)));
    assert.deepEqual(
      failed.map((r) => [r.containerId, r.err]),
      [['c3', 'stewardd journal write failed (error: disk full)']],
    );
    assert.equal(state('c3').state, 'deleting');
    full = false;
    await engine.handle(req('DEL', 'c3'));
    await engine.idle('c3');
    assert.deepEqual(
      calls.filter((c) => c.startsWith('DEL')),
      ['DEL two c3', 'DEL one c3', 'DEL one c3'],
      'the repeat reaches the journal and finishes the teardown',
    );
    assert.equal(state('c3').state, 'deleted');
  });
});
