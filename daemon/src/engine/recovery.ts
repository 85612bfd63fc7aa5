// Start-up recovery, run before the socket accepts requests:
//  1. reboot sweep: live attachments recorded under another kernel boot id are torn down with an
//     empty CNI_NETNS (their netns died with that boot; the spec allows an empty netns on DEL);
//  2. ADDs cut off mid-chain (attachments left `adding`) are rolled back;
//  3. teardowns cut off (attachments left `deleting`) are resumed;
//  4. DELs the shim spooled while the daemon was down are ingested.
// Failures stay journaled as del_failed, so the retry scheduler picks them up.

import { mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { podFromCniArgs, podLogFields } from '@cni-steward/shared';
import type { Engine } from './engine.js';
import { Priority } from './limiter.js';
import { decodeWireRequest } from '@cni-steward/shared';

export interface RecoveryReport {
  staleBoot: number;
  rolledBack: number;
  resumed: number;
  spooled: number;
  spoolRejected: number;
}

export async function recover(engine: Engine, bootId: string, spoolDir: string, log: Logger): Promise<RecoveryReport> {
  const { store } = engine;
  const report: RecoveryReport = { staleBoot: 0, rolledBack: 0, resumed: 0, spooled: 0, spoolRejected: 0 };

  // A teardown that fails stays journaled for the retry scheduler; start-up never stops on one.
  const tearDown = async (ids: number[], opts: { force: true; emptyNetns?: boolean }) => {
    const results = await Promise.allSettled(ids.map((id) => engine.runTeardown(id, Priority.Background, opts)));
    for (const r of results) if (r.status === 'rejected') log.error({ err: String(r.reason) }, 'recovery teardown could not run; left for the retry scheduler');
  };
  const handled = new Set<number>();
  /** Ids not yet torn down by an earlier pass (a failed stale-boot teardown is `deleting` now too). */
  const fresh = (list: { id: number }[]): number[] => {
    const ids = list.map((a) => a.id).filter((id) => !handled.has(id));
    for (const id of ids) handled.add(id);
    return ids;
  };

  const stale = fresh(store.attachmentsOfOtherBoot(bootId));
  await tearDown(stale, { force: true, emptyNetns: true });
  report.staleBoot = stale.length;

  const cutOff = fresh(store.attachmentsInState('adding'));
  await tearDown(cutOff, { force: true });
  report.rolledBack = cutOff.length;

  const resumed = fresh(store.attachmentsInState('deleting'));
  await tearDown(resumed, { force: true });
  report.resumed = resumed.length;

  const spool = await ingestSpool(engine, spoolDir, log);
  report.spooled = spool.ingested;
  report.spoolRejected = spool.rejected;
  log.info(report, 'recovery finished');
  return report;
}

/** Handles every spooled DEL like a runtime DEL; unreadable files are moved aside, never lost. */
export async function ingestSpool(engine: Engine, spoolDir: string, log: Logger): Promise<{ ingested: number; rejected: number }> {
  let names: string[];
  try {
    names = readdirSync(spoolDir).filter((n) => n.endsWith('.json')).sort();
  } catch {
    return { ingested: 0, rejected: 0 };
  }
  let ingested = 0;
  let rejected = 0;
  for (const name of names) {
    const file = join(spoolDir, name);
    let req;
    try {
      req = decodeWireRequest(JSON.parse(readFileSync(file, 'utf8')));
      if (req.env.command !== 'DEL') throw new Error(`spooled command is ${req.env.command}, only DEL is spooled`);
    } catch (e) {
      // Never lost: moved aside for an operator to read.
      const aside = join(spoolDir, 'rejected');
      mkdirSync(aside, { recursive: true, mode: 0o700 });
      renameSync(file, join(aside, name));
      rejected++;
      log.error({ file, err: (e as Error).message }, 'spooled DEL could not be decoded; moved to spool/rejected');
      continue;
    }
    try {
      await engine.handle(req);
    } catch (e) {
      // The teardown is journaled (and retried) whatever the DEL answered; the file has done its job.
      log.warn({ file, containerId: req.env.containerId, ...podLogFields(podFromCniArgs(req.env.args)), err: (e as Error).message }, 'spooled DEL did not complete; its teardown stays queued');
    }
    unlinkSync(file);
    ingested++;
  }
  return { ingested, rejected };
}
