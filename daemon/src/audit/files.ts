// Reading a file found on the node (a lease, a cache document) without trusting what it is: never
// through a symlink (its content would be reported, as someone else's, and a release would act on
// it), never waiting (open(2) of a FIFO blocks until a writer comes, holding a libuv thread and the
// audit forever), never more than a bound (a huge file is not read into the daemon's memory).

import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

export interface PlainFile {
  /** At most maxBytes of the file's start, as UTF-8. */
  text: string;
  /** The file's whole size: more than maxBytes means `text` is its start only. */
  size: number;
  mtimeMs: number;
}

/** A regular file's first maxBytes and its stat; null for anything else or any failure. */
export async function readPlainFile(path: string, maxBytes: number): Promise<PlainFile | null> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const buf = Buffer.alloc(Math.min(maxBytes, st.size));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return { text: buf.subarray(0, bytesRead).toString('utf8'), size: st.size, mtimeMs: st.mtimeMs };
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}
