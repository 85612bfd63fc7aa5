// Start-up recovery, begun before the socket accepts requests (daemon.ts waits for it up to
// --recovery-wait, and lets the rest run while it serves):
//  0. plugins the dead daemon left running (steps journaled `adding` or `deleting` with a process)
//     are killed, and waited for, before anything is rolled back (plugin-processes.ts);
//  1. reboot sweep: live attachments recorded under another kernel boot id are torn down with an
//     empty CNI_NETNS (their netns died with that boot; the spec allows an empty netns on DEL);
//  2. ADDs cut off mid-chain (attachments left `adding`) are rolled back;
//  3. teardowns cut off (attachments left `deleting`) are resumed.
// Every list is taken first, before anything runs: an ADD served while the sweep still runs is
// `adding` too, and rolling it back would tear a live pod down. Every teardown is queued in its
// container's queue at once, so a request of that container (a container id reused after the reboot)
// waits behind its own teardown; a pool as wide as background work may be starts them in list order,
// and none once stopped (shutdown): what is left stays in the journal for the next start.
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
  /** Teardowns never started because recovery was stopped first: the next start runs them. */
  notStarted: number;
  /** Teardowns that could not run (the journal refused a write): still journaled as they were. */
  couldNotRun: number;
}

export async function recover(
  engine: Engine,
  bootId: string,
  log: Logger,
  stopped: () => boolean = () => false,
): Promise<RecoveryReport> {
  const { store } = engine;
  const taken = new Set<number>();
  /** Ids not in an earlier list (an attachment of another boot may be `adding` or `deleting` too). */
  const fresh = (list: { id: number }[]): number[] => {
    const ids = list.map((a) => a.id).filter((id) => !taken.has(id));
    for (const id of ids) taken.add(id);
    return ids;
  };
  const stale = fresh(store.attachmentsOfOtherBoot(bootId));
  const cutOff = fresh(store.attachmentsInState('adding'));
  const resumed = fresh(store.attachmentsInState('deleting'));
  const report: RecoveryReport = {
    staleBoot: stale.length,
    rolledBack: cutOff.length,
    resumed: resumed.length,
    notStarted: 0,
    couldNotRun: 0,
  };
  const queued = [
    ...stale.map((id) => queue(engine, log, id, { force: true, emptyNetns: true }, stopped)),
    ...cutOff.map((id) => queue(engine, log, id, { force: true }, stopped)),
    ...resumed.map((id) => queue(engine, log, id, { force: true }, stopped)),
  ];

  // Before any rollback: a plugin still running could allocate after its step was rolled back.
  try {
    await stopCutOffPlugins(store, log);
  } catch (e) {
    for (const q of queued) q.start(false); // their containers' queues go on; the journal keeps them
    throw e;
  }
  let next = 0;
  const worker = async () => {
    while (next < queued.length) {
      const q = queued[next++] as Queued;
      const go = !stopped();
      q.start(go);
      const outcome = go ? await q.done : 'not started';
      if (outcome === 'not started') report.notStarted++;
      else if (outcome === 'could not run') report.couldNotRun++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(queued.length, engine.limiter.backgroundSlots) }, worker));

  if (report.notStarted > 0) log.warn(report, 'recovery stopped before it finished; the rest runs at the next start');
  else log.info(report, 'recovery finished');
  return report;
}

interface Queued {
  /** Starts the teardown (true) or leaves it to the journal (false). */
  start: (go: boolean) => void;
  /** Once started: what became of it. */
  done: Promise<'ran' | 'not started' | 'could not run'>;
}

/**
 * One teardown queued in its container's queue, waiting for its start. Started, it checks `stopped`
 * again when its container's turn comes (a second attachment of a container waits for the first, and
 * shutdown may begin meanwhile). A failure stays journaled for the retry scheduler.
 */
function queue(
  engine: Engine,
  log: Logger,
  id: number,
  opts: { force: true; emptyNetns?: boolean },
  stopped: () => boolean,
): Queued {
  let start!: (go: boolean) => void;
  const granted = new Promise<boolean>((resolve) => (start = resolve));
  let late = false;
  // Asked when its container's turn comes and again once it holds the gate, either of which may be
  // after shutdown began.
  const still = () => {
    late = stopped();
    return !late;
  };
  const turn = { start: () => granted.then((go) => go && still()), still };
  const couldNotRun = (e: unknown) => {
    log.error({ err: String(e) }, 'recovery teardown could not run; left for the retry scheduler');
    return 'could not run' as const;
  };
  let done: Queued['done'];
  try {
    done = engine
      .runTeardown(id, Priority.Background, opts, turn)
      .then(() => (late ? ('not started' as const) : ('ran' as const)), couldNotRun);
  } catch (e) {
    // Not even queued (its row could not be read): nothing waits for its start.
    done = Promise.resolve(couldNotRun(e));
  }
  return { start, done };
}
