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
  lstatSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * Reads a regular file (links followed) in chunks, never blocking and never opening anything else:
 * the path is stat'ed first and only a regular file is opened (a FIFO would hold open(2) and read(2),
 * and with them the daemon's whole event loop, for good; opening a device can act on it), then it is
 * opened O_NONBLOCK|O_NOCTTY and checked again on the descriptor (replaced in between: refused too).
 * More than `maxBytes` is refused before reading, and a file that grows past it while read stops the
 * read there: at most `maxBytes + 1` bytes are ever read, one chunk of `chunkBytes` held at a time.
 */
export function readRegularFileChunks(
  path: string,
  maxBytes: number,
  onChunk: (chunk: Buffer) => void,
  chunkBytes = 1024 * 1024,
): void {
  if (!statSync(path).isFile()) throw new NotRegularFileError(path);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new NotRegularFileError(path);
    if (st.size > maxBytes) throw new FileTooLargeError(path, st.size, maxBytes);
    const buf = Buffer.allocUnsafe(Math.max(1, Math.min(chunkBytes, st.size + 1)));
    for (let total = 0; ;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) return;
      total += n;
      if (total > maxBytes) throw new FileTooLargeError(path, total, maxBytes, true);
      onChunk(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
}

/** A regular file's content, read by readRegularFileChunks (never blocking, at most `maxBytes`). */
export function readRegularFile(path: string, maxBytes = MAX_REGULAR_FILE_BYTES): Buffer {
  const chunks: Buffer[] = [];
  readRegularFileChunks(path, maxBytes, (c) => chunks.push(Buffer.from(c)));
  return Buffer.concat(chunks);
}

/** A regular file's sha256, hashed as read by readRegularFileChunks (never more than one chunk in memory). */
export function sha256RegularFile(path: string, maxBytes = MAX_REGULAR_FILE_BYTES): string {
  const h = createHash('sha256');
  readRegularFileChunks(path, maxBytes, (c) => h.update(c));
  return h.digest('hex');
}

/**
 * sha256RegularFile without holding the event loop: the same checks and bound (only a regular file,
 * opened O_NONBLOCK|O_NOCTTY, checked again on the descriptor, at most `maxBytes` read), but each
 * chunk is read on libuv's thread pool and awaited, so the loop turns between two chunks and is held
 * only while one chunk (1 MiB: a few ms) is hashed. A 250 MiB shim hashed at once held it ~230 ms or
 * more (issue 41), every second when the file is touched every second.
 */
export async function sha256RegularFileAsync(
  path: string,
  maxBytes = MAX_REGULAR_FILE_BYTES,
  chunkBytes = 1024 * 1024,
): Promise<string> {
  if (!(await stat(path)).isFile()) throw new NotRegularFileError(path);
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new NotRegularFileError(path);
    if (st.size > maxBytes) throw new FileTooLargeError(path, st.size, maxBytes);
    const h = createHash('sha256');
    const buf = Buffer.allocUnsafe(Math.max(1, Math.min(chunkBytes, st.size + 1)));
    for (let total = 0; ;) {
      const { bytesRead: n } = await fh.read(buf, 0, buf.length, null);
      if (n === 0) return h.digest('hex');
      total += n;
      if (total > maxBytes) throw new FileTooLargeError(path, total, maxBytes, true);
      h.update(buf.subarray(0, n));
    }
  } finally {
    await fh.close();
  }
}

/**
 * The most any node file is read: the shim (104-111 MB for Bun's build, a few MB for the Go one) with
 * room to spare. Node cannot hold more than 2 GiB in one Buffer anyway; a bigger file is refused.
 */
export const MAX_REGULAR_FILE_BYTES = 256 * 1024 * 1024;

/** What readRegularFileChunks throws for a file over its bound. */
export class FileTooLargeError extends Error {
  constructor(path: string, size: number, maxBytes: number, grew = false) {
    super(
      grew
        ? `${path} grew past the ${maxBytes} bytes read while it was read`
        : `${path} is ${size} bytes, more than the ${maxBytes} read`,
    );
  }
}

/** What readRegularFile throws for a FIFO, device, socket or directory at the path. */
export class NotRegularFileError extends Error {
  constructor(path: string) {
    super(`${path} is not a regular file`);
  }
}

/**
 * The file's sha256 (of "not a regular file" for a FIFO or device there, of "too large" for one over
 * `maxBytes`: neither is a file install wrote), or undefined when it does not exist.
 */
export function sha256File(path: string, maxBytes = MAX_REGULAR_FILE_BYTES): string | undefined {
  try {
    return sha256RegularFile(path, maxBytes);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if (e instanceof NotRegularFileError) return sha256(`not a regular file: ${path}`);
    if (e instanceof FileTooLargeError) return sha256(`too large: ${path}`);
    throw e;
  }
}

/**
 * How the file at `path` whose sha256File is `now` differs from what install wrote, for an operator:
 * a FIFO, device, socket or directory put there is said to be one (its "sha256" is only a marker),
 * a file over the bound too, a rewritten file by its sha256 (and `installed`'s, when given).
 */
export function changeOf(path: string, now: string, installed?: readonly string[]): string {
  if (now === sha256(`not a regular file: ${path}`))
    return 'is no longer a regular file (a directory, FIFO, device or socket is there now)';
  if (now === sha256(`too large: ${path}`)) return 'was rewritten since install (now larger than stewardd reads)';
  return `was rewritten since install (sha256 now ${now}${installed ? `, installed ${installed.join(' or ')}` : ''})`;
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
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return false;
    // On a read-only file system unlink(2) says EROFS before it looks: a file that is not there is
    // gone all the same (an uninstall failed on a conflist removed earlier, hostile run, 1 Dec).
    if (code === 'EROFS' && !existsLink(path)) return false;
    throw e;
  }
  fsyncDir(dirname(path));
  return true;
}

/** Whether anything (a link included) is at `path`. */
function existsLink(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
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

/** Whether `path` itself (not what a link there names) is a regular file or a symbolic link. */
export function isFileOrLink(path: string): boolean {
  try {
    const st = lstatSync(path);
    return st.isFile() || st.isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Renames an edited conflist (or a link in its place) beside itself, to a name that ends in no
 * extension a runtime loads (libcni reads .conf, .conflist and .json); returns the new path. A
 * rename in one directory is atomic and needs no free space (uninstall runs on full disks too).
 */
export function moveAside(path: string): string {
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const to = `${path}.edited-${stamp}`;
  renameSync(path, to);
  fsyncDir(dirname(path));
  return to;
}
