// The cost of tracing (issue 40; docs/tracing.md): the chain row's ADD+DEL (bridge + host-local in a
// fresh netns, through the shipped shim) against stewardds that differ only in tracing, alternated
// in the same run (each iteration runs every mode, in a balanced order: bench/lib/order.ts; each in
// its own new netns):
//   off       no endpoint: no span is made (the shipped default)
//   offTwin   a second, identical off daemon: the floor of what two daemons differ by here
//   offCtx    off, the runtime passing TRACEPARENT (handed to the delegates unchanged)
//   stopped   exporting to a collector that is down (connection refused): the target, <= 1.05x off
//   frozen    exporting to one that accepts and never answers, with a 64-span queue: the steady state
//             of a long outage, every span past the queue dropped
//   sink      exporting to a loopback OTLP/HTTP server that takes every batch (200)
//   base      (BENCH_TRACING_BASE=<another checkout, built>) that tree's stewardd, e.g. the commit
//             before tracing: what "off" costs against no tracing code at all
// Besides the wall time per ADD+DEL it reports each daemon's own time per request (the mean of its
// request histogram), which the shim's and the plugins' process noise does not reach. A second row
// drives the same daemons alone over their sockets with the no-op delegate, in alternating blocks,
// and reports each one's own CPU per ADD+DEL (/proc: the daemon and its plugin spawner), the
// figure in which the spans' own cost shows. A third row times, in this process, what tracing adds
// to one request's path alone (its span, the wait's, two delegates', five commits') against the bare path.

import { execFileSync } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { callEnv, execCni, leasedAddresses, type Executed } from '../lib/exec.js';
import { BenchDaemon, type DaemonTime } from '../lib/daemon.js';
import { bridgeHostLocal, noopConf, stewardOver, wireBody } from '../lib/netconf.js';
import { hintHeaders, type CniRequestBody } from '@cni-steward/shared';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createLogger } from '../../daemon/src/log.js';
import { startExport } from '../../daemon/src/tracing/export.js';
import { inRequestContext } from '../../daemon/src/tracing/context.js';
import { Tracing } from '../../daemon/src/tracing/tracing.js';
import { shimExecutable } from '../lib/paths.js';
import { freeLoopbackPort } from '../lib/ports.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, pairedRatio, round, timeMs } from '../lib/stats.js';
import { balancedOrder, wholeCycles } from '../lib/order.js';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function ok(what: string, a: Executed): Executed {
  if (a.code !== 0) throw new Error(`${what} exited ${a.code}: ${a.stdout.slice(0, 300)}`);
  return a;
}

/** A collector that takes connections and never answers (SIGSTOPped, or its node gone). */
async function frozenCollector(env: Scratch): Promise<number> {
  const held: Socket[] = [];
  const s = createServer((sock) => {
    held.push(sock);
    sock.on('error', () => undefined);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  env.defer(() => {
    for (const sock of held) sock.destroy();
    s.close();
  });
  return (s.address() as { port: number }).port;
}

/** An OTLP/HTTP receiver that takes every batch (an empty ExportTraceServiceResponse). */
async function sinkCollector(env: Scratch): Promise<{ port: number; batches: () => number }> {
  let batches = 0;
  const s = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      batches++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  env.defer(() => void s.close());
  return { port: (s.address() as { port: number }).port, batches: () => batches };
}

/** A counter's total over its labels in a daemon's /metrics. */
async function counter(d: BenchDaemon, name: string): Promise<number> {
  const text = (await d.request('GET', '/metrics')).text;
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

/** Sequential ADD+DEL pairs of the no-op delegate over the socket; the daemon's CPU (ms) and each pair's wall time. */
async function noopPairs(d: BenchDaemon, tag: string, pairs: number, ctxHeader: boolean) {
  const conf = noopConf(d.socket);
  const pairMs: number[] = [];
  const cpu0 = d.cpu();
  for (let i = 0; i < pairs; i++) {
    const cid = `${tag}-${i}`;
    const t0 = process.hrtime.bigint();
    for (const command of ['ADD', 'DEL']) {
      const body = wireBody(command, cid, conf);
      const wire = JSON.parse(body) as { env: Record<string, string> };
      const headers = { ...hintHeaders(wire.env, conf), ...(ctxHeader ? { traceparent: TRACEPARENT } : {}) };
      const r = await d.request('POST', '/v1/cni', body, headers);
      if (r.status !== 200) throw new Error(`${tag} ${command}: ${r.status} ${r.text.slice(0, 200)}`);
    }
    pairMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const cpu1 = d.cpu();
  return { cpuMs: cpu1.self - cpu0.self, pairMs };
}

/** The daemons alone: alternating blocks of no-op pairs; CPU per pair and the pairs' median per mode. */
async function daemonAlone(daemons: Record<string, BenchDaemon>, ctx: BenchContext): Promise<Row> {
  const modes = Object.keys(daemons);
  const cpu: Record<string, number> = Object.fromEntries(modes.map((m) => [m, 0]));
  const ms: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
  const rounds = wholeCycles(n(15, ctx, 3), modes.length);
  const block = 20;
  for (const m of modes) await noopPairs(daemons[m]!, `warm-${m}`, 10, m === 'offCtx');
  for (let r = 0; r < rounds; r++) {
    for (const m of balancedOrder(modes, r)) {
      const res = await noopPairs(daemons[m]!, `alone-${m}-${r}`, block, m === 'offCtx');
      cpu[m]! += res.cpuMs;
      ms[m]!.push(...res.pairMs);
    }
  }
  const pairs = rounds * block;
  const perPair = (m: string) => round(cpu[m]! / pairs, 3);
  const extra: Record<string, number> = {};
  for (const m of modes) {
    extra[`${m}CpuMsPerPair`] = perPair(m);
    extra[`${m}PairMs`] = round(median(ms[m]!), 3);
  }
  ctx.log(`tracing (daemon alone): ${JSON.stringify(extra)}`);
  const off = perPair('off');
  return {
    id: 'tracing-daemon',
    title:
      'daemon alone (no-op delegate, over the socket): its CPU per ADD+DEL exporting to a stopped collector vs tracing off',
    unit: 'ms CPU',
    candidate: { label: 'stewardd --otlp-endpoint (collector down)', median: perPair('stopped'), n: pairs },
    floor: { label: 'the same, tracing off', median: off, n: pairs },
    ratio: round(perPair('stopped') / off, 3),
    ratioOf: 'CPU per pair, totals over the run',
    target: 'reported',
    met: null,
    extra,
    notes: [
      `blocks of ${block} sequential pairs per mode, in a balanced order per round; CPU of the daemon and its plugin spawner from /proc (10 ms ticks, totals over ${pairs} pairs per mode)`,
    ],
  };
}

const REQUEST_BODY = {
  env: { command: 'ADD', containerId: 'c1', netns: '/run/netns/x', ifname: 'eth0', args: 'K8S_POD_NAME=a', path: '/p' },
  config: { cniVersion: '1.0.0', name: 'steward' },
} as unknown as CniRequestBody;

/**
 * One request's tracing work as the daemon does it, without the daemon: arrival, context, the
 * request's span, two delegate runs (TRACEPARENT built, onStart), five commits. `t` undefined: the
 * same awaits and calls with no tracing at all (the floor).
 */
async function tracedRequest(t: Tracing | undefined, headers: Record<string, string>): Promise<void> {
  const req = { headers } as unknown as IncomingMessage;
  const work = async (describe: (r: CniRequestBody) => void) => {
    describe(REQUEST_BODY);
    t?.commit(0.001, true);
    for (let i = 0; i < 2; i++) {
      const d = t?.delegate({ type: 'bridge', command: 'ADD', containerId: 'c1', ifname: 'eth0', network: 'p' });
      const onStart = d ? d.onStart(() => t?.commit(0.0001, false)) : () => undefined;
      onStart?.({ pid: 1 });
      d?.exited({ code: 0, signal: null, timedOut: false });
      d?.end();
      t?.commit(0.0001, false);
    }
  };
  if (t === undefined) return work(() => undefined);
  t.listener(() => undefined)(req, {} as ServerResponse);
  await inRequestContext(req, () => (t.recording ? t.request('ADD', work) : work(() => undefined)));
}

/**
 * CPU µs per request of tracedRequest, in this process (the bench runner's): no tracing code, off,
 * off with the runtime's context, exporting to a loopback receiver (the CPU of the export itself
 * included: the queue holds every span, the last batches are flushed within the measure), and
 * exporting to a collector that is down (the shipped queue: past it, spans are dropped).
 */
async function spanCost(env: Scratch, ctx: BenchContext): Promise<Row> {
  const runs = n(5000, ctx, 500);
  const measure = async (
    t: Tracing | undefined,
    headers: Record<string, string> = {},
    finish?: () => Promise<void>,
  ) => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < runs; i++) await tracedRequest(t, headers);
    await finish?.();
    const c = process.cpuUsage(c0);
    return round((c.user + c.system) / runs, 2);
  };
  const exporter = async (port: number, maxQueueSize: number) =>
    new Tracing(
      startExport({
        url: `http://127.0.0.1:${port}/v1/traces`,
        maxQueueSize,
        maxExportBatchSize: 512,
        scheduledDelayMs: 5000,
        exportTimeoutMs: 10_000,
        version: 'bench',
        log: createLogger('silent'),
      }),
    );
  const sink = await sinkCollector(env);
  // Warm every path once (JIT), then measure.
  const toSink = await exporter(sink.port, 1 << 20);
  const down = await exporter(await freeLoopbackPort(), 2048);
  for (const t of [undefined, new Tracing(), toSink, down]) for (let i = 0; i < 500; i++) await tracedRequest(t, {});
  const bare = await measure(undefined);
  const off = await measure(new Tracing());
  const offCtx = await measure(new Tracing(), { traceparent: TRACEPARENT });
  const exported = await measure(toSink, {}, () => toSink.shutdown(10_000));
  const stopped = await measure(down);
  const dropped = down.dropped();
  await down.shutdown(100);
  const extra = {
    bareUs: bare,
    offUs: off,
    offCtxUs: offCtx,
    exportedUs: exported,
    stoppedUs: stopped,
    sinkBatches: sink.batches(),
    stoppedQueueFull: dropped.queue_full,
  };
  ctx.log(`tracing (one request's spans, in process): ${JSON.stringify(extra)}`);
  return {
    id: 'tracing-spans',
    title: "one request's tracing work in process (its span, the wait's, 2 delegates', 5 commits'): CPU per request",
    unit: 'µs CPU',
    candidate: { label: 'exported to a loopback OTLP/HTTP receiver (export included)', median: exported, n: runs },
    floor: { label: 'the same path, no tracing code', median: bare, n: runs },
    target: 'reported',
    met: null,
    extra,
    notes: [
      'off: tracing off, no runtime context (a header lookup); offCtx: off, the runtime passing TRACEPARENT (its context entered, the delegates given it); stopped: a collector that is down, the shipped 2048-span queue (flooded here: most spans dropped); means over the runs, process.cpuUsage',
    ],
  };
}

const inside = (a: DaemonTime, b: DaemonTime) =>
  ((b.requestS - a.requestS) * 1000) / Math.max(1, b.requests - a.requests);

/** Long on purpose: the modes, their daemons and the one alternating loop read best together. */
export async function benchTracing(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const shim = shimExecutable();
  const sink = await sinkCollector(env);
  const endpoint = (port: number) => ['--otlp-endpoint', `http://127.0.0.1:${port}`];
  const base = process.env.BENCH_TRACING_BASE;
  const daemons: Record<string, BenchDaemon> = {
    off: new BenchDaemon(env, 'trace-off'),
    offTwin: new BenchDaemon(env, 'trace-off-twin'),
    offCtx: new BenchDaemon(env, 'trace-off-ctx'),
    stopped: new BenchDaemon(env, 'trace-stopped', endpoint(await freeLoopbackPort())),
    frozen: new BenchDaemon(env, 'trace-frozen', [...endpoint(await frozenCollector(env)), '--otlp-queue-size', '64']),
    sink: new BenchDaemon(env, 'trace-sink', endpoint(sink.port), undefined, { OTEL_BSP_SCHEDULE_DELAY: '1000' }),
    ...(base ? { base: new BenchDaemon(env, 'trace-base', [], join(base, 'bin/stewardd')) } : {}),
  };
  const modes = Object.keys(daemons);
  for (const d of Object.values(daemons)) await d.start();
  try {
    const bridge = env.bridge();
    const dataDir = join(env.dir, 'tracing-ipam');
    const plugin = bridgeHostLocal(bridge, env.subnet(), dataDir);
    const run = async (mode: string, cid: string, netns: string) => {
      const d = daemons[mode] as BenchDaemon;
      const conf = JSON.stringify(stewardOver(d.socket, [plugin], join(d.stateDir, 'spool')));
      const extra: Record<string, string> = mode === 'offCtx' ? { TRACEPARENT } : {};
      ok(`${mode} ADD`, await execCni(shim.path, { ...callEnv('ADD', cid, netns), ...extra }, conf));
      ok(`${mode} DEL`, await execCni(shim.path, { ...callEnv('DEL', cid, netns), ...extra }, conf));
    };
    const iters = wholeCycles(n(40, ctx), modes.length);
    const t: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
    let spent0: Record<string, DaemonTime> = {};
    for (let i = -1; i < iters; i++) {
      // i = -1 warms every daemon (and creates the bridge), not recorded.
      if (i === 0)
        spent0 = Object.fromEntries(await Promise.all(modes.map(async (m) => [m, await daemons[m]!.timeSpent()])));
      for (const mode of balancedOrder(modes, i + 1)) {
        const name = `stwtrace-${process.pid % 10000}-${mode}-${i + 1}`;
        execFileSync('ip', ['netns', 'add', name]);
        try {
          const ms = await timeMs(() => run(mode, `bench-trace-${mode}-${i + 1}`, `/run/netns/${name}`));
          if (i >= 0) t[mode]!.push(ms);
        } finally {
          execFileSync('ip', ['netns', 'del', name]);
        }
      }
    }
    const insideMs: Record<string, number> = {};
    for (const m of modes) insideMs[m] = round(inside(spent0[m]!, await daemons[m]!.timeSpent()), 3);
    const leaked = leasedAddresses(dataDir, 'podnet');
    if (leaked.length > 0) throw new Error(`host-local leases left after ADD+DEL: ${leaked.join(', ')}`);
    const off = t.off!;
    const ratio = pairedRatio(t.stopped!, off);
    const extra: Record<string, number | string> = {};
    for (const m of modes) {
      extra[`${m}Ms`] = round(median(t[m]!));
      if (m !== 'off') extra[`${m}Ratio`] = round(pairedRatio(t[m]!, off), 3);
      extra[`${m}InsideMeanMs`] = insideMs[m]!;
    }
    extra.stoppedDropped = await counter(daemons.stopped!, 'steward_trace_spans_dropped_total');
    extra.frozenDropped = await counter(daemons.frozen!, 'steward_trace_spans_dropped_total');
    extra.sinkBatches = sink.batches();
    extra.sinkDropped = await counter(daemons.sink!, 'steward_trace_spans_dropped_total');
    ctx.log(`tracing: ${JSON.stringify(extra)}`);
    const alone = await daemonAlone(daemons, ctx);
    const spans = await spanCost(env, ctx);
    return [
      {
        id: 'tracing',
        title: 'ADD+DEL, bridge + host-local through the shim: exporting traces to a stopped collector vs tracing off',
        unit: 'ms',
        candidate: {
          label: `${shim.kind} + stewardd --otlp-endpoint (collector down)`,
          median: round(median(t.stopped!)),
          n: iters,
        },
        floor: { label: 'the same, tracing off (no endpoint)', median: round(median(off)), n: iters },
        ratio: round(ratio, 3),
        target: '<= 1.05x (issue 40)',
        met: ratio <= 1.05,
        extra,
        notes: [
          'modes alternate in one run, in a balanced order per iteration (each mode follows every other equally often), each ADD+DEL in a fresh netns; ratios are medians of per-iteration ratios against off',
          "offTwin: a second off daemon (the noise floor between two daemons); offCtx: off, with the runtime passing TRACEPARENT; frozen: a collector that never answers, queue 64 (every span past it dropped); sink: a loopback OTLP/HTTP receiver answering 200; base: BENCH_TRACING_BASE's stewardd",
          "…InsideMeanMs: each daemon's own mean time per request (its steward_cni_request_duration_seconds), without the shim's and plugins' process noise",
        ],
      },
      alone,
      spans,
    ];
  } finally {
    for (const d of Object.values(daemons)) await d.stop();
  }
}
