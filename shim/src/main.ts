// The `steward` CNI plugin executable: read stdin (bounded), run the skel, print, exit.
// stdout is written with writeSync on fd 1, not process.stdout: in the Bun-compiled shim the first
// touch of process.stdout builds a stream and costs ~3 ms CPU of a ~14 ms call (docs/performance.md,
// "The shim call").

import { readSync, writeSync } from 'node:fs';
import { MAX_NETCONF_BYTES, spoolRequest } from '@cni-steward/shared';
import { postUnix } from './client.js';
import { runShim } from './skel.js';

function readStdin(limit: number): Buffer {
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

/** Writes all of `data` to fd 1, also when the runtime handed over a non-blocking pipe. */
function writeAll(data: Buffer): void {
  for (let off = 0; off < data.length;) {
    try {
      off += writeSync(1, data, off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
    }
  }
}

const out = await runShim({
  env: process.env,
  stdin: readStdin(MAX_NETCONF_BYTES + 1),
  send: postUnix,
  spool: spoolRequest,
  // performance.now() counts from the process's start, in Node and in Bun: the STATUS bound includes it.
  elapsedMs: () => performance.now(),
});
writeAll(Buffer.from(out.stdout, 'utf8'));
// Exit now: a request that outlived its bound may still hold a socket open.
process.exit(out.exitCode);
