// The DEL spool: requests the shim (or a degraded daemon) wrote while stewardd could not take them,
// ingested at start (recovery.ts) and on every scheduler tick. Every entry is handled like a runtime
// DEL; what cannot be read safely (a link, a FIFO, a directory, an oversized or undecodable file) is
// moved to spool/rejected/ for an operator, never deleted and never allowed to block the event loop.

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as fsConstants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { MAX_NETCONF_BYTES, decodeWireRequest, podFromCniArgs, podLogFields } from '@cni-steward/shared';
import type { Engine } from './engine.js';

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
    if ((e as NodeJS.ErrnoException).code === 'ELOOP')
      throw new Error('is a symbolic link; only regular files are read', { cause: e });
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      const kind = st.isDirectory()
        ? 'a directory'
        : st.isFIFO()
          ? 'a FIFO'
          : st.isSocket()
            ? 'a socket'
            : 'a device or other special file';
      throw new Error(`is ${kind}; only regular files are read`);
    }
    if (st.size > MAX_SPOOL_FILE_BYTES)
      throw new Error(`is ${st.size} bytes, more than the ${MAX_SPOOL_FILE_BYTES} a spooled DEL can be`);
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
  if (!lstatSync(aside).isDirectory())
    throw new Error(`${aside} is not a directory (a symbolic link?); not moving anything into it`);
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
export async function ingestSpool(
  engine: Engine,
  spoolDir: string,
  log: Logger,
): Promise<{ ingested: number; rejected: number }> {
  let names: string[];
  try {
    names = readdirSync(spoolDir)
      .filter((n) => n.endsWith('.json'))
      .sort();
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
        log.error(
          { file, err: (e as Error).message, moveErr: (me as Error).message },
          'spooled DEL rejected and could not be moved aside',
        );
      }
      continue;
    }
    try {
      await engine.handle(req);
    } catch (e) {
      // The teardown is journaled (and retried) whatever the DEL answered; the file has done its job.
      log.warn(
        {
          file,
          containerId: req.env.containerId,
          ...podLogFields(podFromCniArgs(req.env.args)),
          err: (e as Error).message,
        },
        'spooled DEL did not complete; its teardown stays queued',
      );
    }
    unlinkSync(file);
    ingested++;
  }
  return { ingested, rejected };
}
