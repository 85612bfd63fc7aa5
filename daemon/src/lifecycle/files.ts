// Writing and removing node files so a runtime never sees half of one: temp file in the same dir,
// fsync, rename, fsync of the dir. Temp names are ".<name>.<8 hex>.tmp", so libcni never loads them
// and uninstall can recognise (and remove) one a crash left behind.

import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fchmodSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * A regular file's content (links followed), read without ever blocking: opened O_NONBLOCK and
 * checked to be a regular file first, so a FIFO (which open and read would wait on forever, with
 * the daemon's whole event loop) or a device is refused, and so is one over `maxBytes`.
 */
export function readRegularFile(path: string, maxBytes = Number.POSITIVE_INFINITY): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new NotRegularFileError(path);
    if (st.size > maxBytes) throw new Error(`${path} is ${st.size} bytes, more than the ${maxBytes} read`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** What readRegularFile throws for a FIFO, device, socket or directory at the path. */
export class NotRegularFileError extends Error {
  constructor(path: string) {
    super(`${path} is not a regular file`);
  }
}

/** The file's sha256 (of "not a regular file" for a FIFO or device there), or undefined when it does not exist. */
export function sha256File(path: string): string | undefined {
  try {
    return sha256(readRegularFile(path));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if (e instanceof NotRegularFileError) return sha256(`not a regular file: ${path}`);
    throw e;
  }
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Replaces `path` with `data` atomically; mode is set explicitly (the umask does not apply). */
export function atomicWrite(path: string, data: Buffer | string, mode: number): void {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(4).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', mode);
  try {
    try {
      const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      for (let off = 0; off < buf.length;) off += writeSync(fd, buf, off, buf.length - off);
      fchmodSync(fd, mode);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    if (existsSync(tmp)) unlinkSync(tmp);
    throw e;
  }
  fsyncDir(dir);
}

/** Removes a file and makes the removal durable; a file already gone is fine. */
export function removeDurably(path: string): boolean {
  try {
    unlinkSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  fsyncDir(dirname(path));
  return true;
}

/** atomicWrite's temp files for `path` (left behind only by a crash mid-write), oldest name first. */
export function tempsOf(path: string): string[] {
  const base = basename(path);
  const prefix = `.${base}.`;
  let names: string[];
  try {
    names = readdirSync(dirname(path));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return names
    .filter((n) => n.startsWith(prefix) && /^[0-9a-f]{8}\.tmp$/.test(n.slice(prefix.length)))
    .sort()
    .map((n) => join(dirname(path), n));
}
