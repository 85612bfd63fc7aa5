// Benchmark 2: ADD then DEL of bridge + host-local in a fresh netns, through the shim and the
// daemon, against the same chain executed directly as a runtime does (bridge ADD, then bridge DEL
// with the ADD result as prevResult; bridge runs host-local itself). Each iteration runs every mode
// in a balanced order (bench/lib/order.ts), each in its own new netns made and removed outside the
// timing, on one shared bridge.

import { execFile, execFileSync } from 'node:child_process';
import { hintHeaders } from '@cni-steward/shared';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { callEnv, execCni, leasedAddresses, type Executed } from '../lib/exec.js';
import { BenchDaemon, type DaemonTime } from '../lib/daemon.js';
import { bridgeHostLocal, cniVars, stewardOver, wireBody } from '../lib/netconf.js';
import { shimExecutable, SYSTEM_CNI_BIN } from '../lib/paths.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { mean, median, pairedDiff, pairedRatio, round, timeMs } from '../lib/stats.js';
import { balancedOrder, wholeCycles } from '../lib/order.js';

const VERSION = '1.0.0';

function ok(what: string, a: Executed): Executed {
  if (a.code !== 0) throw new Error(`${what} exited ${a.code}: ${a.stdout.slice(0, 300)}`);
  return a;
}

/** A netns for one iteration, removed right after it (and by env.close() if we fail first). */
function withNetns(env: Scratch, tag: string): { path: string; remove: () => void } {
  const name = `stwbench-${process.pid % 10000}-${tag}`;
  execFileSync('ip', ['netns', 'add', name]);
  const remove = () => {
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    } catch {
      /* gone */
    }
  };
  env.defer(remove);
  return { path: `/run/netns/${name}`, remove };
}

/** Runs curl with `stdin` as its input; rejects unless it exits 0 (-f: an HTTP error is a failure). */
function curl(args: string[], stdin: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile('curl', args, (err, _out, stderr) =>
      err ? reject(new Error(`curl failed: ${stderr || err.message}`)) : resolve(),
    );
    child.stdin?.end(stdin);
  });
}

/** stewardd's time inside the requests of one mode, summed over its timed ADD+DEL pairs. */
interface Inside extends DaemonTime {
  pairs: number;
}

const noTime = (): Inside => ({ pairs: 0, requests: 0, requestS: 0, pluginS: 0, pluginRuns: 0 });

function addSpent(into: Inside, before: DaemonTime, after: DaemonTime): void {
  into.pairs += 1;
  for (const k of ['requests', 'requestS', 'pluginS', 'pluginRuns'] as const) into[k] += after[k] - before[k];
}

/**
 * Where the over-the-socket overhead goes, as means per ADD+DEL of that mode alone (stewardd's
 * histograms hold sums, read after each timed pair): the daemon's own path, the extra its delegate
 * runs take over the same runs executed directly, and the rest (client, connection, request before
 * the handler). The socket mode's own figures make the split; the shim's and curl's insides are
 * kept to show the daemon does the same work whoever sends the request.
 */
function daemonSplit(
  inside: Record<'s' | 'h' | 'c', Inside>,
  direct: number[],
  overSocket: number[],
): Record<string, number> {
  for (const [mode, t] of Object.entries(inside))
    if (t.requests !== 2 * t.pairs)
      throw new Error(`stewardd counted ${t.requests} requests for ${t.pairs} ADD+DEL pairs of mode ${mode}`);
  const perPair = (t: Inside, seconds: number) => (seconds * 1000) / t.pairs;
  const h = inside.h;
  const insideMs = perPair(h, h.requestS);
  const delegatesMs = perPair(h, h.pluginS);
  return {
    daemonInsideMeanMs: round(insideMs),
    daemonOwnMeanMs: round(insideMs - delegatesMs),
    delegatesViaDaemonMeanMs: round(delegatesMs),
    directMeanMs: round(mean(direct)),
    spawnerHopMeanMs: round(delegatesMs - mean(direct)),
    overSocketMeanMs: round(mean(overSocket)),
    socketMeanMs: round(mean(overSocket) - insideMs),
    shimInsideMeanMs: round(perPair(inside.s, inside.s.requestS)),
    curlInsideMeanMs: round(perPair(inside.c, inside.c.requestS)),
    pluginRunsPerPair: round(h.pluginRuns / h.pairs),
  };
}

export async function benchChain(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const shim = shimExecutable();
  const daemon = new BenchDaemon(env, 'chain');
  await daemon.start();
  try {
    const bridge = env.bridge();
    const subnet = env.subnet();
    const dataDir = join(env.dir, 'chain-ipam');
    const plugin = bridgeHostLocal(bridge, subnet, dataDir);
    const stewardNet = stewardOver(daemon.socket, [plugin], join(daemon.stateDir, 'spool'));
    const directConf = { cniVersion: VERSION, name: 'podnet', ...plugin };
    const bridgeExe = join(SYSTEM_CNI_BIN, 'bridge');

    const viaSteward = async (cid: string, netns: string) => {
      ok('steward ADD', await execCni(shim.path, callEnv('ADD', cid, netns), JSON.stringify(stewardNet)));
      ok('steward DEL', await execCni(shim.path, callEnv('DEL', cid, netns), JSON.stringify(stewardNet)));
    };
    const direct = async (cid: string, netns: string) => {
      const add = ok('bridge ADD', await execCni(bridgeExe, callEnv('ADD', cid, netns), JSON.stringify(directConf)));
      ok(
        'bridge DEL',
        await execCni(
          bridgeExe,
          callEnv('DEL', cid, netns),
          JSON.stringify({ ...directConf, prevResult: JSON.parse(add.stdout) }),
        ),
      );
    };

    // For the breakdown: the same ADD+DEL sent to the daemon over its socket, without the shim.
    const viaSocket = async (cid: string, netns: string) => {
      for (const command of ['ADD', 'DEL']) {
        await daemon.cni(wireBody(command, cid, stewardNet, netns));
      }
    };
    // The floor of any executed client: the same two requests, each one `curl --unix-socket` process
    // (what the shim call is measured against), so the shim's ratio can be read against it.
    const viaCurl = async (cid: string, netns: string) => {
      for (const command of ['ADD', 'DEL']) {
        const hints = hintHeaders(cniVars(command, cid, netns), stewardNet);
        const headers = Object.entries({ ...hints, 'content-type': 'application/json' }).flatMap(([k, v]) => [
          '-H',
          `${k}: ${v}`,
        ]);
        const args = ['-sS', '-f', '-o', '/dev/null', '--unix-socket', daemon.socket, ...headers];
        await curl(
          [...args, '--data-binary', '@-', 'http://localhost/v1/cni'],
          wireBody(command, cid, stewardNet, netns),
        );
      }
    };
    const modes = { s: viaSteward, d: direct, h: viaSocket, c: viaCurl };
    const names = Object.keys(modes) as Array<keyof typeof modes>;
    const iters = wholeCycles(n(60, ctx), names.length);
    const t: Record<keyof typeof modes, number[]> = { s: [], d: [], h: [], c: [] };
    const inside = { s: noTime(), h: noTime(), c: noTime() };
    for (let i = -1; i < iters; i++) {
      // i = -1 is a warm-up of every mode (it also creates the bridge), not recorded.
      for (const which of balancedOrder(names, i + 1)) {
        const ns = withNetns(env, `${which}${i + 1}`);
        try {
          const cid = `bench-chain-${which}-${i + 1}`;
          // Read before and after each timed pair, outside the timing, so each mode is split on its own.
          const before = i >= 0 && which !== 'd' ? await daemon.timeSpent() : undefined;
          const ms = await timeMs(() => modes[which](cid, ns.path));
          if (i >= 0) t[which].push(ms);
          if (before !== undefined && which !== 'd') addSpent(inside[which], before, await daemon.timeSpent());
        } finally {
          ns.remove();
        }
      }
    }
    const { s, d, h, c } = t;
    const split = daemonSplit(inside, d, h);
    const leaked = leasedAddresses(dataDir, 'podnet');
    if (leaked.length > 0) throw new Error(`host-local leases left after ADD+DEL: ${leaked.join(', ')}`);
    const ratio = pairedRatio(s, d);
    return [
      {
        id: 'chain',
        title: 'ADD+DEL, bridge + host-local, fresh netns',
        unit: 'ms',
        candidate: { label: `${shim.kind} + stewardd`, median: round(median(s)), n: s.length },
        floor: { label: 'bridge ADD then DEL executed directly', median: round(median(d)), n: d.length },
        ratio: round(ratio),
        target: '<= 1.10x',
        met: ratio <= 1.1,
        extra: {
          overheadMs: round(pairedDiff(s, d)),
          daemonOnlyMs: round(median(h)),
          daemonOverheadMs: round(pairedDiff(h, d)),
          shimOverheadMs: round(pairedDiff(s, h)),
          daemonOnlyRatio: round(pairedRatio(h, d)),
          curlMs: round(median(c)),
          curlRatio: round(pairedRatio(c, d)),
          shimMinusCurlMs: round(pairedDiff(s, c)),
          ...split,
        },
        notes: [
          'daemonOnly: the same ADD+DEL sent to stewardd over its socket without the shim (overheads are medians of per-iteration differences)',
          'each iteration runs the four modes (shim, direct, socket, curl) in the order of a balanced Latin square (bench/lib/order.ts): each mode follows every other equally often, so what one leaves behind is not charged to one neighbour',
          'curl: the same ADD+DEL with each request one `curl --unix-socket` process, the floor of any executed client (shimMinusCurlMs: what the shim costs over it per ADD+DEL)',
          "split of the daemon's overhead, means per ADD+DEL of the socket mode from stewardd's request and plugin histograms read before and after each timed pair: daemonOwnMeanMs its own path (HTTP handler, journal and its fsyncs, planning, answer), spawnerHopMeanMs its delegates' runs (spawner round trip and fork included) minus the direct runs' mean, socketMeanMs the over-the-socket mean minus the time inside the daemon (the client, the connection, the request before the handler starts); shimInsideMeanMs and curlInsideMeanMs: the same inside time for the other two modes",
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
