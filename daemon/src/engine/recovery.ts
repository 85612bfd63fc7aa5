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
import type { Engine } from './engine.js';
import { Priority } from './limiter.js';
import { decodeWireRequest } from '../routes/cni.js';

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

  const stale = store.attachmentsOfOtherBoot(bootId);
  await Promise.all(stale.map((a) => engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true })));
  report.staleBoot = stale.length;

  const cutOff = store.attachmentsInState('adding');
  await Promise.all(cutOff.map((a) => engine.runTeardown(a.id, Priority.Background, { force: true })));
  report.rolledBack = cutOff.length;

  const resumed = store.attachmentsInState('deleting');
  await Promise.all(resumed.map((a) => engine.runTeardown(a.id, Priority.Background, { force: true })));
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
      log.warn({ file, containerId: req.env.containerId, err: (e as Error).message }, 'spooled DEL did not complete; its teardown stays queued');
    }
    unlinkSync(file);
    ingested++;
  }
  return { ingested, rejected };
}
