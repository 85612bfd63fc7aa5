// Start-up recovery, run before the socket accepts requests:
//  1. reboot sweep: live attachments recorded under another kernel boot id are torn down with an
//     empty CNI_NETNS (their netns died with that boot; the spec allows an empty netns on DEL);
//  2. ADDs cut off mid-chain (attachments left `adding`) are rolled back;
//  3. teardowns cut off (attachments left `deleting`) are resumed;
//  4. DELs the shim spooled while the daemon was down are ingested.
// Failures stay journaled as del_failed, so the retry scheduler picks them up.

import { randomBytes } from 'node:crypto';
import {
  closeSync, constants as fsConstants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readSync, renameSync, unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { podFromCniArgs, podLogFields } from '@cni-steward/shared';
import type { Engine } from './engine.js';
import { Priority } from './limiter.js';
import { MAX_NETCONF_BYTES } from '@cni-steward/shared';
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

/** A spooled request is at most a netconf plus its CNI_* envelope. */
export const MAX_SPOOL_FILE_BYTES = MAX_NETCONF_BYTES + 64 * 1024;

/**
 * Reads one spool entry without following links or blocking: opened O_NOFOLLOW|O_NONBLOCK (a
 * symlink fails with ELOOP, a FIFO opens at once and is then refused by fstat), only a regular
 * file of at most MAX_SPOOL_FILE_BYTES is read, and never more than that.
 */
function readSpoolFile(file: string): string {
  let fd: number;
  try {
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ELOOP') throw new Error('is a symbolic link; only regular files are read');
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      const kind = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device or other special file';
      throw new Error(`is ${kind}; only regular files are read`);
    }
    if (st.size > MAX_SPOOL_FILE_BYTES) throw new Error(`is ${st.size} bytes, more than the ${MAX_SPOOL_FILE_BYTES} a spooled DEL can be`);
    const buf = Buffer.alloc(MAX_SPOOL_FILE_BYTES + 1);
    let n = 0;
    for (let r; n < buf.length && (r = readSync(fd, buf, n, buf.length - n, null)) > 0;) n += r;
    if (n > MAX_SPOOL_FILE_BYTES) throw new Error(`grew past ${MAX_SPOOL_FILE_BYTES} bytes while being read`);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Moves a spool entry (whatever it is: file, link, FIFO, directory) into spool/rejected/, never over another one. */
function reject(spoolDir: string, name: string): string {
  const aside = join(spoolDir, 'rejected');
  mkdirSync(aside, { recursive: true, mode: 0o700 });
  // Never into a place a link points at: rejected/ must be a real directory.
  if (!lstatSync(aside).isDirectory()) throw new Error(`${aside} is not a directory (a symbolic link?); not moving anything into it`);
  let target = join(aside, name);
  if (existsOrLink(target)) target = join(aside, `${name}.${Date.now()}-${randomBytes(3).toString('hex')}`);
  renameSync(join(spoolDir, name), target);
  return target;
}

function existsOrLink(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Handles every spooled DEL like a runtime DEL; anything unreadable is moved aside, never lost. */
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
      req = decodeWireRequest(JSON.parse(readSpoolFile(file)));
      if (req.env.command !== 'DEL') throw new Error(`spooled command is ${req.env.command}, only DEL is spooled`);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // gone since readdir
      // Never lost: moved aside for an operator to read.
      try {
        const to = reject(spoolDir, name);
        rejected++;
        log.error({ file, movedTo: to, err: (e as Error).message }, 'spooled DEL rejected; moved to spool/rejected');
      } catch (me) {
        log.error({ file, err: (e as Error).message, moveErr: (me as Error).message }, 'spooled DEL rejected and could not be moved aside');
      }
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
