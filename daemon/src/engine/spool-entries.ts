// The spool's entries read safely, in bounded batches (spool.ts drains them): only regular files of at
// most a request's size, opened without following links or blocking; whatever cannot be read safely
// (a link, a FIFO, a directory, an oversized or undecodable file, a command other than DEL) is moved
// to spool/rejected/ for an operator, never deleted.

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as fsConstants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  type Dir,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { MAX_REQUEST_BYTES, decodeWireRequest } from '@cni-steward/shared';
import { parseWireJson } from '../faithful-json.js';

// Spool file names are SPOOL_NAME (shared/src/spool.ts): the one format both writers use, the Go
// shim's and spoolRequest, described in shared/vectors/spool.json: time, first 64 chars of the
// container id, random.

/** A spooled request is at most a netconf plus its CNI_* envelope. */
export const MAX_SPOOL_FILE_BYTES = MAX_REQUEST_BYTES;

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
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new Error('is a symbolic link; only regular files are read', { cause: e });
    // Linux refuses to open a Unix socket at all: fstat below never sees one.
    if (code === 'ENXIO')
      throw new Error('is a socket (or a device with nothing behind it); only regular files are read', { cause: e });
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      const kind = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'a device or other special file';
      throw new Error(`is ${kind}; only regular files are read`);
    }
    if (st.size > MAX_SPOOL_FILE_BYTES)
      throw new Error(`is ${st.size} bytes, more than the ${MAX_SPOOL_FILE_BYTES} a spooled DEL can be`);
    // One byte more than fstat said, to notice a file still growing; never more than the cap + 1.
    const buf = Buffer.allocUnsafe(Math.min(st.size, MAX_SPOOL_FILE_BYTES) + 1);
    let n = 0;
    for (let r; n < buf.length && (r = readSync(fd, buf, n, buf.length - n, null)) > 0;) n += r;
    if (n > st.size) throw new Error(`grew past its ${st.size} bytes while being read`);
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

/** How many entries one batch reads, and how many bytes of requests it holds at most. */
const BATCH_FILES = 256;
const BATCH_BYTES = 8 * 1024 * 1024;

export interface SpoolReport {
  ingested: number;
  rejected: number;
  /** Spooled DELs that failed before their teardown reached the journal: their files stay (spool.ts runBatch). */
  kept?: number;
}

/** A spooled DEL read from its file, by the file's name. */
export interface SpooledDel {
  name: string;
  req: ReturnType<typeof decodeWireRequest>;
}

/** The next batch of readable spooled DELs; what cannot be read safely is moved aside on the way. */
export function readBatch(
  dir: Pick<Dir, 'readSync'>,
  spoolDir: string,
  report: SpoolReport,
  settled: (name: string) => void,
  log: Logger,
): { batch: SpooledDel[]; end: boolean } {
  const batch: SpooledDel[] = [];
  let bytes = 0;
  while (batch.length < BATCH_FILES && bytes < BATCH_BYTES) {
    const ent = dir.readSync();
    if (ent === null) return { batch, end: true };
    const name = ent.name;
    if (!name.endsWith('.json')) continue;
    const file = join(spoolDir, name);
    try {
      const text = readSpoolFile(file);
      bytes += text.length;
      const req = decodeWireRequest(parseWireJson(text));
      if (req.env.command !== 'DEL') throw new Error(`spooled command is ${req.env.command}, only DEL is spooled`);
      batch.push({ name, req });
    } catch (e) {
      // Gone since it was listed, or never lost: moved aside for an operator to read.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') setAside(spoolDir, name, e as Error, report, log);
      settled(name);
    }
  }
  return { batch, end: false };
}

function setAside(spoolDir: string, name: string, err: Error, report: SpoolReport, log: Logger): void {
  const file = join(spoolDir, name);
  try {
    const to = reject(spoolDir, name);
    report.rejected++;
    log.error({ file, movedTo: to, err: err.message }, 'spooled DEL rejected; moved to spool/rejected');
  } catch (me) {
    log.error(
      { file, err: err.message, moveErr: (me as Error).message },
      'spooled DEL rejected and could not be moved aside',
    );
  }
}
