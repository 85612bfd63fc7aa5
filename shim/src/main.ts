// The `steward` CNI plugin executable: read stdin (bounded), run the skel, print, exit.

import { readSync } from 'node:fs';
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

const out = await runShim({
  env: process.env,
  stdin: readStdin(MAX_NETCONF_BYTES + 1),
  send: postUnix,
  spool: spoolRequest,
});
process.stdout.write(out.stdout);
process.exitCode = out.exitCode;
