// The shim's stdin and stdout under Node, on fd 0 and 1 directly: the first touch of
// process.stdout builds a stream, which costs more than the rest of a call. The Bun-compiled shim
// swaps in stdio-bun.ts (scripts/bundle-shim.mjs), whose Bun-native I/O does not load node:fs.

import { readSync, writeSync } from 'node:fs';

/** stdin, read until EOF or until more than `limit` bytes arrived (the caller rejects those). */
export async function readStdin(limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  const buf = Buffer.allocUnsafe(65536);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buf, 0, buf.length, null);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') continue;
      if (code === 'EOF') break;
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
