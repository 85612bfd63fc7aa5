// How long a large GET /v1/attachments holds stewardd's other answers (routes/status.ts writes it 250
// rows a turn since 29 Nov 2026; before, in one turn): a journal of ATTACHMENTS live attachments
// (populateJournal, as the restart and scrape rows fill theirs), a stewardd on it, and per round one
// GET /v1/attachments?limit=100000 with /readyz asked back to back while it runs. Prints, per round,
// the big answer's time and bytes and the longest /readyz. EXE: a built bin/stewardd (another tree's
// for a before/after: `git worktree add`, `npx tsc -b` there).
//   node --import tsx bench/tools/attachments-loop.ts [EXE] [ATTACHMENTS] [ROUNDS]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { REPO } from '../lib/paths.js';

const exe = process.argv[2] ?? join(REPO, 'bin/stewardd');
const ATTACHMENTS = Number(process.argv[3] ?? 60_000);
const ROUNDS = Number(process.argv[4] ?? 3);

const dir = mkdtempSync('/tmp/attachments-loop-');
const socket = join(dir, 's.sock');
writeFileSync(join(dir, 'boot'), 'bench-boot\n');
const conf = {
  cniVersion: '1.0.0',
  name: 'net',
  type: 'steward',
  socket,
  delegates: [{ name: 'd', cniVersion: '1.0.0', plugins: [{ type: 'noop' }] }],
};
populateJournal(join(dir, 'steward.db'), ATTACHMENTS, 'bench-boot', conf);

/** One GET over the socket: its wall ms and the bytes of its answer. */
const get = (path: string) =>
  new Promise<{ ms: number; bytes: number }>((resolve, reject) => {
    const t0 = performance.now();
    const req = request({ socketPath: socket, path }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ ms: performance.now() - t0, bytes }));
    });
    req.on('error', reject);
    req.end();
  });

const daemon = spawn(
  process.execPath,
  [exe, 'run', '--socket', socket, '--state-dir', dir, '--boot-id-file', join(dir, 'boot'), '--nice', 'off'],
  { stdio: 'ignore' },
);
try {
  for (let i = 0; ; i++) {
    try {
      await get('/readyz');
      break;
    } catch (e) {
      if (i > 150) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  for (let round = 1; round <= ROUNDS; round++) {
    let done = false;
    const big = get('/v1/attachments?limit=100000').finally(() => (done = true));
    const probes: number[] = [];
    while (!done) probes.push((await get('/readyz')).ms);
    const b = await big;
    console.log(
      JSON.stringify({
        round,
        attachments: ATTACHMENTS,
        answerMs: Math.round(b.ms),
        answerBytes: b.bytes,
        readyzAsked: probes.length,
        readyzMaxMs: Math.round(Math.max(...probes)),
      }),
    );
  }
} finally {
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
