// Start-up recovery, run before the socket accepts requests:
//  0. plugins the dead daemon left running (steps journaled `adding` or `deleting` with a process)
//     are killed, and waited for, before anything is rolled back (plugin-processes.ts);
//  1. reboot sweep: live attachments recorded under another kernel boot id are torn down with an
//     empty CNI_NETNS (their netns died with that boot; the spec allows an empty netns on DEL);
//  2. ADDs cut off mid-chain (attachments left `adding`) are rolled back;
//  3. teardowns cut off (attachments left `deleting`) are resumed;
// DELs the shim spooled while the daemon was down are drained after the socket opens, in the
// background (spool.ts SpoolDrain), so a spool backlog never keeps stewardd off its socket.
// Failures stay journaled as del_failed, so the retry scheduler picks them up.

import type { Logger } from 'pino';
import type { Engine } from './engine.js';
import { Priority } from './limiter.js';
import { stopCutOffPlugins } from './plugin-processes.js';

export interface RecoveryReport {
  staleBoot: number;
  rolledBack: number;
  resumed: number;
}

export async function recover(engine: Engine, bootId: string, log: Logger): Promise<RecoveryReport> {
  const { store } = engine;
  const report: RecoveryReport = { staleBoot: 0, rolledBack: 0, resumed: 0 };

  // A teardown that fails stays journaled for the retry scheduler; start-up never stops on one.
  const tearDown = async (ids: number[], opts: { force: true; emptyNetns?: boolean }) => {
    const results = await Promise.allSettled(ids.map((id) => engine.runTeardown(id, Priority.Background, opts)));
    for (const r of results)
      if (r.status === 'rejected')
        log.error({ err: String(r.reason) }, 'recovery teardown could not run; left for the retry scheduler');
  };
  const handled = new Set<number>();
  /** Ids not yet torn down by an earlier pass (a failed stale-boot teardown is `deleting` now too). */
  const fresh = (list: { id: number }[]): number[] => {
    const ids = list.map((a) => a.id).filter((id) => !handled.has(id));
    for (const id of ids) handled.add(id);
    return ids;
  };

  // Before any rollback: a plugin still running could allocate after its step was rolled back.
  await stopCutOffPlugins(store, log);

  const stale = fresh(store.attachmentsOfOtherBoot(bootId));
  await tearDown(stale, { force: true, emptyNetns: true });
  report.staleBoot = stale.length;

  const cutOff = fresh(store.attachmentsInState('adding'));
  await tearDown(cutOff, { force: true });
  report.rolledBack = cutOff.length;

  const resumed = fresh(store.attachmentsInState('deleting'));
  await tearDown(resumed, { force: true });
  report.resumed = resumed.length;

  log.info(report, 'recovery finished');
  return report;
}
