// The `steward` CNI plugin executable: read stdin (bounded), run the skel, print, exit.
// stdin and stdout go through stdio.ts (fd 0 and 1 under Node; Bun's own I/O in the compiled
// shim), never process.stdout: in the Bun-compiled shim its first touch builds a stream and costs
// ~3 ms CPU (docs/performance.md, "The shim call").

import { MAX_NETCONF_BYTES, avoidExitHang, spoolRequest } from '@cni-steward/shared';
import { postUnix } from './client.js';
import { runShim, stdinBoundMs, stdinNotClosed } from './skel.js';
import { readStdin, writeStdout } from './stdio.js';

avoidExitHang(); // before anything that could leave a compile job running at exit
// performance.now() counts from the process's start, in Node and in Bun: the STATUS bound includes it.
const stdinMs = stdinBoundMs(process.env, performance.now());
const stdin = await readStdin(MAX_NETCONF_BYTES + 1, stdinMs);
const out =
  stdin === undefined
    ? stdinNotClosed(stdinMs)
    : await runShim({
        env: process.env,
        stdin,
        send: postUnix,
        spool: spoolRequest,
        elapsedMs: () => performance.now(),
      });
try {
  await writeStdout(out.stdout);
} catch {
  // stdout closed under us (EPIPE): nobody reads the answer; the exit code is all that is left.
}
// Exit now: a request that outlived its bound may still hold a socket open.
process.exit(out.exitCode);
