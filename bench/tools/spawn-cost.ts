// What starting one plugin costs in CPU: Node's child_process.spawn (how stewardd's spawner starts a
// delegate: its own process group, stdio piped; libuv forks the whole Node process, then the child
// execs) against Go's os/exec (how containerd starts the same plugin: a vfork-style clone), each
// running PROGRAM (default /bin/true) N times in turn, R rounds alternating. CPU is the spawning
// process's and its reaped children's together (the fork's copy and the child's exec both count).
// The Node side is a bare `node` process (no tsx), close to the spawner's size. The work around the
// exec is each one's own, not identical: Node pipes stdin and starts a session (detached), Go sets a
// process group and gives /dev/null as stdin (os/exec's default, given no input). Prints JSON: medians
// per run over the rounds and their ratio.
//   node --import tsx bench/tools/spawn-cost.ts [N=400] [R=5] [PROGRAM=/bin/true]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildGoFixture } from '../lib/go-fixtures.js';
import { median, round } from '../lib/stats.js';

const N = Number(process.argv[2] ?? 400);
const ROUNDS = Number(process.argv[3] ?? 5);
const PROGRAM = process.argv[4] ?? '/bin/true';

interface Run {
  cpuMsPerRun: number;
  wallMsPerRun: number;
}

// utime + stime + cutime + cstime (proc(5) fields 14-17), in ms at 100 ticks a second.
const NODE_LOOP = `
const { spawn } = require('node:child_process');
const { readFileSync } = require('node:fs');
const cpu = () => readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ').slice(11, 15).reduce((a, b) => a + Number(b), 0) * 10;
(async () => {
  const [n, program] = [Number(process.argv[1]), process.argv[2]];
  const c0 = cpu(), t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const child = spawn(program, [], { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    child.stdout.resume(); child.stderr.resume();
    const code = await new Promise((r) => child.on('close', r));
    if (code !== 0) throw new Error(program + ' exited ' + code);
  }
  console.log(JSON.stringify({ cpuMsPerRun: (cpu() - c0) / n, wallMsPerRun: (performance.now() - t0) / n }));
})();
`;

const dir = mkdtempSync(join(tmpdir(), 'spawn-cost-'));
try {
  const goBin = buildGoFixture('spawn-cost', join(dir, 'spawn-cost'));
  const node: Run[] = [];
  const go: Run[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const runNode = () =>
      node.push(
        JSON.parse(execFileSync(process.execPath, ['-e', NODE_LOOP, String(N), PROGRAM], { encoding: 'utf8' })),
      );
    const runGo = () => go.push(JSON.parse(execFileSync(goBin, [String(N), PROGRAM], { encoding: 'utf8', input: '' })));
    if (r % 2 === 0) [runNode, runGo].forEach((f) => f());
    else [runGo, runNode].forEach((f) => f());
  }
  const nodeCpu = median(node.map((x) => x.cpuMsPerRun));
  const goCpu = median(go.map((x) => x.cpuMsPerRun));
  console.log(
    JSON.stringify(
      {
        program: PROGRAM,
        runsPerRound: N,
        rounds: ROUNDS,
        nodeCpuMsPerRun: round(nodeCpu, 3),
        goCpuMsPerRun: round(goCpu, 3),
        nodeOverGoCpu: round(nodeCpu / goCpu, 3),
        nodeWallMsPerRun: round(median(node.map((x) => x.wallMsPerRun)), 3),
        goWallMsPerRun: round(median(go.map((x) => x.wallMsPerRun)), 3),
      },
      null,
      2,
    ),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
