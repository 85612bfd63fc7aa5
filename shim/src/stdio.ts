// The shim's stdin and stdout under Node, on fd 0 and 1 directly: the first touch of
// process.stdout builds a stream, which costs more than the rest of a call. The Bun-compiled shim
// swaps in stdio-bun.ts (scripts/bundle-shim.mjs), whose Bun-native I/O does not load node:fs.

import { fstatSync, readSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';

/**
 * stdin, read until EOF or until more than `limit` bytes arrived (the caller rejects those);
 * undefined when it is still open after `timeoutMs` (a runtime always writes and closes it, so the
 * shim's bounds hold however long a broken caller keeps it open). A pipe or socket is read on the
 * event loop (as node:net reads process.stdin), never by a blocking read that would hold the exit
 * too; a file or /dev/null ends on its own.
 */
export function readStdin(limit: number, timeoutMs: number): Promise<Buffer | undefined> {
  const st = fstatSync(0);
  if (!st.isFIFO() && !st.isSocket()) return Promise.resolve(readToEnd(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const pipe = new Socket({ fd: 0, readable: true, writable: false });
    const finish = (v: Buffer | undefined) => {
      clearTimeout(timer);
      pipe.removeAllListeners('data');
      pipe.pause();
      resolve(v);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    pipe.on('data', (b: Buffer) => {
      chunks.push(b);
      total += b.length;
      if (total > limit) finish(Buffer.concat(chunks));
    });
    pipe.once('end', () => finish(Buffer.concat(chunks)));
    pipe.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** A file's whole content up to `limit` + 1 bytes, read where it is. */
function readToEnd(limit: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  const buf = Buffer.allocUnsafe(65536);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buf, 0, buf.length, null);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EOF') break;
      throw e;
    }
    if (n === 0) break;
    chunks.push(Buffer.from(buf.subarray(0, n)));
    total += n;
    if (total > limit) break;
  }
  return Buffer.concat(chunks);
}

/** Writes all of `text` to fd 1, also when the runtime handed over a non-blocking pipe. */
export async function writeStdout(text: string): Promise<void> {
  const data = Buffer.from(text, 'utf8');
  for (let off = 0; off < data.length;) {
    try {
      off += writeSync(1, data, off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
    }
  }
}
