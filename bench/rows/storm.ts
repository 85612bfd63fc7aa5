// Benchmarks 4 and 5: a DEL storm (100 added containers, 100 DELs each, from 2 concurrent senders
// per container, so 200 in flight) and ADD latency during it against ADD latency on the idle daemon.
// Delegate DELs are counted by the no-op delegate's log (logFile): teardown must run exactly once
// per container however many DELs arrive. Each round measures idle ADDs, then ADDs while the storm
// runs (sequential, one at a time, until the storm ends), then idle ADDs again; the storm is
// driven from a separate process (lib/storm-driver.ts).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { forkDriver } from '../lib/driver.js';
import { noopConf, wireBody } from '../lib/netconf.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { mean, median, p99, round, timeMs } from '../lib/stats.js';
import type { StormOrder, StormReport } from '../lib/storm-driver.js';

const CONTAINERS = 100;
const PER_CONTAINER = 100;
const SENDERS = 2;

async function startDriver(env: Scratch, order: StormOrder): Promise<{ go: () => Promise<StormReport> }> {
  const driver = await forkDriver<StormOrder, StormReport>(
    env,
    new URL('../lib/storm-driver.ts', import.meta.url).pathname,
    order,
  );
  return { go: () => driver.ask('go', 'done').then((m) => m.report as StormReport) };
}

export async function benchStorm(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const daemon = new BenchDaemon(env, 'storm');
  await daemon.start();
  try {
    const plainConf = noopConf(daemon.socket);
    const addOnce = (cid: string) => timeMs(() => daemon.cni(wireBody('ADD', cid, plainConf)));
    for (let i = 0; i < 20; i++) await addOnce(`warm-${i}`);

    const rounds = n(3, ctx, 1);
    const idleEach = n(30, ctx, 10);
    const idle: number[] = [];
    const during: number[] = [];
    const storms: StormReport[] = [];
    // The daemon's own view of ADD time (route handler start to reply, from its histogram), to
    // split client-seen latency into time inside the engine and time queued before the handler.
    const serverAdd = { idle: { sum: 0, count: 0 }, during: { sum: 0, count: 0 } };
    const addHistogram = async () => {
      const text = (await daemon.request('GET', '/metrics')).text;
      const num = (k: string) =>
        Number(
          new RegExp(`^steward_cni_request_duration_seconds_${k}\\{command="ADD"\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0,
        );
      return { sum: num('sum') * 1000, count: num('count') };
    };
    const account = (
      into: { sum: number; count: number },
      a: { sum: number; count: number },
      b: { sum: number; count: number },
    ) => {
      into.sum += b.sum - a.sum;
      into.count += b.count - a.count;
    };
    let wrongCounts: string[] = [];
    for (let r = 0; r < rounds; r++) {
      const logFile = join(daemon.stateDir, `storm-${r}.log`);
      const conf = noopConf(daemon.socket, logFile);
      const containers = Array.from({ length: CONTAINERS }, (_, i) => `storm${r}-${i}`);
      for (let i = 0; i < containers.length; i += 10) {
        await Promise.all(containers.slice(i, i + 10).map((cid) => daemon.cni(wireBody('ADD', cid, conf))));
      }
      const driver = await startDriver(env, {
        socket: daemon.socket,
        containers,
        perContainer: PER_CONTAINER,
        senders: SENDERS,
        conf,
      });

      let h0 = await addHistogram();
      for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`idle${r}a-${i}`));
      let h1 = await addHistogram();
      account(serverAdd.idle, h0, h1);
      let stormDone = false;
      const stormP = driver.go().then((rep) => {
        stormDone = true;
        return rep;
      });
      let k = 0;
      while (!stormDone) during.push(await addOnce(`during${r}-${k++}`));
      storms.push(await stormP);
      h0 = await addHistogram();
      account(serverAdd.during, h1, h0);
      for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`idle${r}b-${i}`));
      h1 = await addHistogram();
      account(serverAdd.idle, h0, h1);

      const lines = existsSync(logFile)
        ? readFileSync(logFile, 'utf8')
            .split('\n')
            .filter((l) => l.startsWith('DEL '))
        : [];
      const counts = new Map<string, number>();
      for (const l of lines) {
        const cid = l.split(' ')[1] as string;
        counts.set(cid, (counts.get(cid) ?? 0) + 1);
      }
      wrongCounts = wrongCounts.concat(
        containers.filter((c) => counts.get(c) !== 1).map((c) => `${c}: ${counts.get(c) ?? 0}`),
      );
      ctx.log(
        `storm round ${r}: ${storms[r]?.requests} DELs in ${round(storms[r]?.ms ?? 0, 0)} ms, ` +
          `${lines.length} delegate DELs, ${k} ADDs measured during it`,
      );
    }

    const non200 = storms.reduce((s, x) => s + x.requests - (x.statuses['200'] ?? 0), 0);
    const p99Ratio = p99(during) / p99(idle);
    const stormMs = median(storms.map((s) => s.ms));
    return [
      {
        id: 'del-storm',
        title: `DEL storm: ${CONTAINERS} containers × ${PER_CONTAINER} DELs, concurrent`,
        unit: 'delegate DELs/container',
        candidate: {
          label: 'delegate DEL executions per container (fixture log)',
          median: wrongCounts.length === 0 ? 1 : Number.NaN,
          n: storms.length * CONTAINERS,
        },
        target: 'exactly 1 per container',
        met: wrongCounts.length === 0 && non200 === 0,
        extra: {
          rounds: storms.length,
          containersWithWrongCount: wrongCounts.length,
          non200Answers: non200,
          stormMs: round(stormMs, 0),
          delsPerSec: round((CONTAINERS * PER_CONTAINER) / (stormMs / 1000), 0),
        },
        notes: [
          `${SENDERS} sequential senders per container (${CONTAINERS * SENDERS} DELs in flight), each DEL on a new connection, over the socket`,
          ...wrongCounts.slice(0, 5).map((w) => `wrong count ${w}`),
        ],
      },
      {
        id: 'add-during-storm',
        title: 'ADD latency during the DEL storm',
        unit: 'ms',
        candidate: {
          label: 'ADD (no-op delegate) during the storm',
          median: round(median(during)),
          p99: round(p99(during)),
          n: during.length,
        },
        floor: { label: 'ADD on the idle daemon', median: round(median(idle)), p99: round(p99(idle)), n: idle.length },
        ratio: round(p99Ratio),
        ratioOf: 'p99',
        target: 'p99 <= 2x',
        met: p99Ratio <= 2,
        extra: {
          p50Ratio: round(median(during) / median(idle)),
          meanMs: round(mean(during)),
          idleMeanMs: round(mean(idle)),
          daemonMeanMs: round(serverAdd.during.sum / serverAdd.during.count),
          idleDaemonMeanMs: round(serverAdd.idle.sum / serverAdd.idle.count),
        },
        notes: [
          'daemonMeanMs: mean ADD time inside stewardd (its request histogram: handler start to reply); the rest of meanMs is queueing before the handler',
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
