// The plugin processes the journal knows of. Each step records the process its plugin was started
// as (pid, start time, boot id, PID namespace) as soon as the spawner reports it; at start-up,
// before anything is rolled back or resumed, recovery kills the process group of every step the
// dead daemon left running (`adding`, `deleting`) and waits until it is gone. Otherwise a plugin
// orphaned by a kill -9 could finish after its step was rolled back and hold an allocation that
// nothing tracks. (The spawner normally kills them itself when the daemon dies, spawner-child.ts;
// this covers the spawner dying with it.)

import type { Logger } from 'pino';
import type { PluginProcess } from '../plugins/executor.js';
import { stopGroups, type StopOutcome } from '../plugins/process-group.js';
import type { Store } from '../store/store.js';

/** How long recovery waits for killed plugins to be gone (SIGKILL takes effect at once unless a process is stuck in the kernel). */
export const STOP_TIMEOUT_MS = 10_000;

/** The onStart of a step's plugin call: journals its process (a failed write is logged, never thrown). */
export function journalProcess(store: Store, log: Logger, stepId: number): (p: PluginProcess) => void {
  return (p) => {
    try {
      store.setStepProcess(stepId, p);
    } catch (e) {
      log.error({ step: stepId, pid: p.pid, err: (e as Error).message }, 'cannot journal the plugin process of a step');
    }
  };
}

export interface StoppedPlugins {
  /** Steps journaled as running a plugin when the daemon stopped. */
  journaled: number;
  /** Of those, process groups still alive and killed now. */
  killed: number;
  /** Pids that outlived SIGKILL past the wait (stuck in the kernel); recovery goes on regardless. */
  survivors: number[];
}

/**
 * Kills, and waits for, the process group of every step journaled as running its plugin. Groups of
 * another boot or PID namespace, and pids now naming another process, are left alone (stopGroups).
 */
export async function stopCutOffPlugins(
  store: Store,
  log: Logger,
  stop: (list: PluginProcess[]) => Promise<StopOutcome> = (list) => stopGroups(list, { timeoutMs: STOP_TIMEOUT_MS }),
): Promise<StoppedPlugins> {
  const running = store.runningStepProcesses();
  if (running.length === 0) return { journaled: 0, killed: 0, survivors: [] };
  const out = await stop(running.map((r) => r.process));
  for (const p of out.killed) {
    const r = running.find((s) => s.process.pid === p.pid && s.process.startTime === p.startTime);
    log.warn(
      { pid: p.pid, step: r?.stepId, attachment: r?.attachmentId, plugin: r?.pluginType, state: r?.state },
      'killed a plugin the previous stewardd left running; its step is rolled back now that it is gone',
    );
  }
  if (out.survivors.length > 0)
    log.error(
      { survivors: out.survivors, waitedMs: STOP_TIMEOUT_MS },
      'plugin processes outlived SIGKILL (stuck in the kernel); recovery goes on',
    );
  return { journaled: running.length, killed: out.killed.length, survivors: out.survivors };
}
