// The engine's side of plugin processes: each step's plugin process is journaled (a failed write is
// logged, never thrown into the spawner's message handler), and recovery hands the stopper exactly
// the processes of steps left running, before anything else; what it logs names the step of each
// plugin it killed (by pid and start time both) and the pids that outlived SIGKILL.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { journalProcess, STOP_TIMEOUT_MS, stopCutOffPlugins } from '../../daemon/src/engine/plugin-processes.js';
import type { PluginProcess } from '../../daemon/src/plugins/process-group.js';
import { Store } from '../../daemon/src/store/store.js';
import { silentLog } from '../helpers/engine-fakes.js';
import { captureLog } from '../helpers/log-capture.js';

const proc = (pid: number): PluginProcess => ({ pid, startTime: 100 + pid, bootId: 'b', pidNamespace: 'pid:[1]' });

function withSteps() {
  const store = new Store(':memory:');
  const a = store.createAttachment({
    containerId: 'c1',
    network: 'net',
    ifname: 'eth0',
    netns: '/run/netns/x',
    cniArgs: '',
    cniPath: '/opt/cni/bin',
    cniVersion: '1.0.0',
    bootId: 'b',
    config: '{}',
  });
  const step = (seq: number) =>
    store.insertStep({
      attachmentId: a.id,
      seq,
      delegateIndex: 0,
      delegateName: 'd',
      ifname: 'eth0',
      pluginIndex: seq,
      pluginType: `p${seq}`,
      config: '{}',
    });
  return { store, step };
}

describe('plugin processes in the journal', () => {
  test("journalProcess records the process on the step's row", () => {
    const { store, step } = withSteps();
    const s = step(0);
    journalProcess(store, silentLog, s.id)(proc(7));
    assert.deepEqual(store.runningStepProcesses()[0]?.process, proc(7));
  });

  test('a journal write that fails is logged, not thrown (it runs in the spawner message handler)', () => {
    const { store, step } = withSteps();
    const s = step(0);
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (l: string) => void lines.push(l) });
    store.close();
    assert.doesNotThrow(() => journalProcess(store, log, s.id)(proc(7)));
    assert.match(lines.join(''), /cannot journal the plugin process of a step/);
  });

  test('recovery stops exactly the processes of steps left adding or deleting, and reports what it killed', async () => {
    const { store, step } = withSteps();
    const [s0, s1, s2, s3] = [step(0), step(1), step(2), step(3)];
    store.setStepProcess(s0.id, proc(10));
    store.setStepAdded(s0.id, '{}');
    store.setStepProcess(s1.id, proc(11));
    store.setStepState(s1.id, 'add_failed', 'x');
    store.setStepProcess(s2.id, proc(12));
    store.setStepDeleting(s2.id);
    store.setStepProcess(s3.id, proc(13));
    const asked: PluginProcess[][] = [];
    const out = await stopCutOffPlugins(store, silentLog, async (list) => {
      asked.push(list);
      return { killed: [proc(13)], survivors: [] };
    });
    assert.deepEqual(asked, [[proc(12), proc(13)]]);
    assert.deepEqual(out, { journaled: 2, killed: 1, survivors: [] });
  });

  test('with nothing journaled as running, the stopper is not called', async () => {
    const { store, step } = withSteps();
    step(0);
    let called = false;
    const out = await stopCutOffPlugins(store, silentLog, async () => {
      called = true;
      return { killed: [], survivors: [] };
    });
    assert.equal(called, false);
    assert.deepEqual(out, { journaled: 0, killed: 0, survivors: [] });
  });
});

const KILLED = 'killed a plugin the previous stewardd left running; its step is rolled back now that it is gone';
const OUTLIVED = 'plugin processes outlived SIGKILL (stuck in the kernel); recovery goes on';

describe("recovery's log of the plugins it stopped", () => {
  const p = (pid: number, startTime: number): PluginProcess => ({
    pid,
    startTime,
    bootId: 'b',
    pidNamespace: 'pid:[1]',
  });

  test('each killed plugin is logged with the step its pid and start time name, not a step that shares only one of them', async () => {
    const { store, step } = withSteps();
    // Three steps left adding: one shares the killed process's start time only, one its pid only
    // (a pid reused since), and the third is that process.
    const [sameStart, samePid, itself] = [step(0), step(1), step(2)];
    store.setStepProcess(sameStart.id, p(12, 113));
    store.setStepProcess(samePid.id, p(13, 999));
    store.setStepProcess(itself.id, p(13, 113));
    const cap = captureLog();
    const out = await stopCutOffPlugins(store, cap.log, async () => ({ killed: [p(13, 113)], survivors: [] }));
    assert.deepEqual(out, { journaled: 3, killed: 1, survivors: [] });
    assert.deepEqual(cap.withLevel(KILLED), [
      { level: 40, pid: 13, step: itself.id, attachment: itself.attachmentId, plugin: 'p2', state: 'adding' },
    ]);
    assert.deepEqual(cap.of(OUTLIVED), [], 'nothing outlived SIGKILL: no error row');
  });

  test('processes that outlived SIGKILL are logged as an error with their pids, and returned', async () => {
    const { store, step } = withSteps();
    const s = step(0);
    store.setStepProcess(s.id, p(21, 121));
    const cap = captureLog();
    const out = await stopCutOffPlugins(store, cap.log, async () => ({ killed: [], survivors: [21] }));
    assert.deepEqual(out, { journaled: 1, killed: 0, survivors: [21] });
    assert.deepEqual(cap.withLevel(OUTLIVED), [{ level: 50, survivors: [21], waitedMs: STOP_TIMEOUT_MS }]);
    assert.deepEqual(cap.of(KILLED), []);
  });
});
