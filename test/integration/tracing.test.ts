// Tracing proven against a real backend (issue 40): a Jaeger (scripts/build-jaeger.sh) on loopback,
// a stewardd exporting to it over OTLP/HTTP, the shipped shim (dist/steward) executed with a
// runtime's TRACEPARENT/TRACESTATE as libcni passes them. The trace read back through Jaeger's query
// API continues the runtime's: the request span's parent is the runtime's span, each delegate's run
// is a span under it, and each delegate saw its own span's TRACEPARENT. A request without a context
// starts a trace of its own; a failed teardown's retry is a `teardown` trace of its own linked to the DEL
// that left it, its delegate runs under it; a failed ADD's rollback DELs are in the ADD's trace, marked
// as such; each request's wait in its container's queue is a span. A frozen, then a stopped, collector never slows ADD or DEL, and the spans
// past the queue are dropped and counted in steward_trace_spans_dropped_total.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { REPO, TestEnv } from '../helpers/env.js';
import { Jaeger, jaegerSkipReason, tags, type JaegerSpan, type JaegerTrace } from '../helpers/jaeger.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { skipOrFail } from '../helpers/runtimes/skip.js';
import { cniEnv, execPlugin, type ShimCall } from '../helpers/shim.js';
import { poll } from '../helpers/poll.js';

/** The shipped shim, as `npm run build` makes it. */
const DIST_SHIM = join(REPO, 'dist/steward');

const env = new TestEnv('tracing');
after(() => env.close());

const skip = skipOrFail(
  'the tracing test (a real Jaeger)',
  jaegerSkipReason() ?? (existsSync(DIST_SHIM) ? undefined : `${DIST_SHIM} is missing: npm run build`),
);

/** The runtime's span: what containerd would put in TRACEPARENT for the CNI call. */
const RUNTIME_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const RUNTIME_SPAN = '00f067aa0ba902b7';
const TRACESTATE = 'containerd=cni,vendor=x1';
/** The small-queue daemon's export timeout (OTEL_EXPORTER_OTLP_TIMEOUT). */
const EXPORT_TIMEOUT_MS = 15_000;
const POD_ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=uid-7';

/** Runs dist/steward as the runtime does, with extra variables (the trace context). */
async function runShim(call: ShimCall, conf: unknown, extra: Record<string, string> = {}) {
  const t0 = performance.now();
  const r = await execPlugin(DIST_SHIM, { ...cniEnv(call), ...extra }, JSON.stringify(conf));
  return { ...r, ms: performance.now() - t0 };
}

const named = (t: JaegerTrace, op: string) => t.spans.filter((s) => s.operationName === op);
const parentOf = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

/** The fixture's recorded calls (its recordEnv: one JSON line per call). */
function envLog(dir: string): Array<{ command: string; containerId: string; env: Record<string, string> }> {
  const f = join(dir, 'env.log');
  if (!existsSync(f)) return [];
  return readFileSync(f, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

/** A counter's value in the daemon's /metrics, 0 when absent. */
async function metric(daemon: Daemon, series: string): Promise<number> {
  const text = (await daemon.get('/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe('tracing over OTLP/HTTP to a real Jaeger', { skip }, () => {
  const jaeger = new Jaeger(env);
  let daemon: Daemon;
  before(async () => {
    await jaeger.start();
    daemon = new Daemon(env, {
      name: 'exporting',
      args: [...FAST_RETRY, '--otlp-endpoint', jaeger.otlpEndpoint],
      env: { OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
    await daemon.start();
  });

  const fx = join(env.dir, 'fx');
  const dataDir = join(env.dir, 'ipam');
  const bridge = env.bridge();
  const subnet = env.subnet();
  const conf = () =>
    stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [bridgePlugin({ bridge, subnet, dataDir }), fixturePlugin(fx, { recordEnv: true })]),
    ]);
  const cid = 'trace-add';
  const netns = env.netns();

  it("one ADD through the shim continues the runtime's trace: the request span, each delegate's span, and each delegate saw its own TRACEPARENT", async () => {
    const res = await runShim({ command: 'ADD', containerId: cid, netns, args: POD_ARGS }, conf(), {
      TRACEPARENT: `00-${RUNTIME_TRACE}-${RUNTIME_SPAN}-01`,
      TRACESTATE,
      BAGGAGE: 'tenant=blue',
    });
    assert.equal(res.code, 0, res.stdout);

    const trace = await poll('the ADD trace in Jaeger', 30_000, async () => {
      const t = await jaeger.trace(RUNTIME_TRACE);
      return t && named(t, 'delegate steward-fixture ADD').length === 1 && named(t, 'cni ADD').length === 1
        ? t
        : undefined;
    });
    assert.equal(trace.traceID, RUNTIME_TRACE);
    const [request] = named(trace, 'cni ADD');
    assert.ok(request);
    assert.equal(
      parentOf(request),
      RUNTIME_SPAN,
      "the request span's parent is the runtime's span (the shim's parent)",
    );
    assert.equal(trace.processes[request.processID]?.serviceName, 'stewardd');
    assert.deepEqual(
      Object.fromEntries(
        Object.entries(tags(request)).filter(
          ([k]) => k.startsWith('cni.') || k.startsWith('k8s.') || k === 'span.kind',
        ),
      ),
      {
        'cni.command': 'ADD',
        'cni.container_id': cid,
        'cni.network': 'steward',
        'cni.ifname': 'eth0',
        'cni.version': '1.0.0',
        'cni.code': 0,
        'k8s.namespace.name': 'shop',
        'k8s.pod.name': 'web-0',
        'k8s.pod.uid': 'uid-7',
        'span.kind': 'server',
      },
    );

    const delegates = trace.spans.filter((s) => s.operationName.startsWith('delegate '));
    assert.deepEqual(delegates.map((s) => s.operationName).sort(), [
      'delegate bridge ADD',
      'delegate steward-fixture ADD',
    ]);
    for (const d of delegates) {
      assert.equal(parentOf(d), request.spanID, `${d.operationName} is the request's child`);
      const t = tags(d);
      assert.equal(t['cni.command'], 'ADD');
      assert.equal(t['cni.container_id'], cid);
      assert.equal(t['cni.network'], 'podnet');
      assert.equal(t['process.exit.code'], 0);
      assert.equal(t['cni.code'], 0);
      assert.equal(typeof t['process.pid'], 'number');
      assert.ok(d.duration > 0);
      assert.ok(d.startTime >= request.startTime && d.startTime + d.duration <= request.startTime + request.duration);
    }
    const first = delegates.reduce((a, b) => (a.startTime <= b.startTime ? a : b));
    const [queue] = named(trace, 'queue + journal');
    assert.ok(queue, 'the wait before the first delegate is a span');
    assert.equal(parentOf(queue), request.spanID);
    assert.ok(queue.startTime + queue.duration <= first.startTime + 1, 'it ends where the first delegate starts');
    const [waited] = named(trace, 'queue wait');
    assert.ok(waited, "the wait in the container's queue is a span of its own");
    assert.equal(parentOf(waited), request.spanID);
    assert.ok(waited.startTime + waited.duration <= first.startTime + 1, 'before the first delegate');
    const commits = named(trace, 'journal commit');
    assert.ok(
      commits.some((c) => tags(c)['steward.journal.synced'] === true && parentOf(c) === request.spanID),
      'the synced commit of the chain is a span of the request',
    );
    assert.ok(
      commits.some((c) => parentOf(c) === first.spanID),
      "the commit of a delegate's process (pid) is that delegate's child",
    );

    // The fixture ran with its own span's context, the runtime's tracestate, and nothing else new.
    const fixture = named(trace, 'delegate steward-fixture ADD')[0]!;
    const call = envLog(fx).find((c) => c.command === 'ADD' && c.containerId === cid);
    assert.ok(call, 'the fixture recorded its environment');
    assert.equal(call.env.TRACEPARENT, `00-${RUNTIME_TRACE}-${fixture.spanID}-01`);
    assert.equal(call.env.TRACESTATE, TRACESTATE);
    assert.deepEqual(Object.keys(call.env).sort(), [
      'CNI_ARGS',
      'CNI_COMMAND',
      'CNI_CONTAINERID',
      'CNI_IFNAME',
      'CNI_NETNS',
      'CNI_PATH',
      'PATH',
      'TRACEPARENT',
      'TRACESTATE',
    ]);

    // The request's log lines carry its trace id.
    const lines = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(`"containerId":"${cid}"`));
    assert.ok(lines.length > 0);
    for (const l of lines) assert.equal(JSON.parse(l).traceId, RUNTIME_TRACE, l);
  });

  it("a request without the runtime's context starts a trace of its own, named in its log lines", async () => {
    const res = await runShim({ command: 'DEL', containerId: cid, netns, args: POD_ARGS }, conf());
    assert.equal(res.code, 0, res.stdout);
    const trace = await poll('the DEL trace', 30_000, async () => {
      const found = await jaeger.search('stewardd', { 'cni.container_id': cid, 'cni.command': 'DEL' });
      const t = found.find((x) => named(x, 'delegate bridge DEL').length === 1 && named(x, 'cni DEL').length === 1);
      return t;
    });
    assert.notEqual(trace.traceID, RUNTIME_TRACE);
    const [request] = named(trace, 'cni DEL');
    assert.ok(request);
    assert.equal(parentOf(request), undefined, 'the request span is the root');
    assert.equal(tags(request)['cni.code'], 0);
    for (const op of ['delegate bridge DEL', 'delegate steward-fixture DEL'])
      assert.equal(parentOf(named(trace, op)[0]!), request.spanID, op);
    const fixture = named(trace, 'delegate steward-fixture DEL')[0]!;
    const call = envLog(fx).find((c) => c.command === 'DEL' && c.containerId === cid);
    assert.equal(call?.env.TRACEPARENT, `00-${trace.traceID}-${fixture.spanID}-01`);
    assert.equal(call?.env.TRACESTATE, undefined);
    assert.ok(
      readFileSync(daemon.logFile, 'utf8').includes(`"traceId":"${trace.traceID}"`),
      'its trace id is in its log lines',
    );
  });

  it("a failed teardown: the DEL's trace holds the failed delegate DEL; the retry is a teardown trace linked to that DEL, its delegate's span under it, its log lines naming it", async () => {
    const fxRetry = join(env.dir, 'fx-retry');
    const retryConf = stewardConf(daemon.socket, '1.0.0', [
      delegate('retrynet', '1.0.0', [fixturePlugin(fxRetry, { failDelTimes: 1, recordEnv: true })]),
    ]);
    const rid = 'trace-retry';
    const netns = env.netns();
    assert.equal((await runShim({ command: 'ADD', containerId: rid, netns }, retryConf)).code, 0);
    const del = await runShim({ command: 'DEL', containerId: rid, netns }, retryConf, {
      TRACEPARENT: `00-${RUNTIME_TRACE.replace(/^4/, '5')}-${RUNTIME_SPAN}-01`,
    });
    assert.equal(del.code, 0, 'the failed teardown is deferred: the runtime hears success');
    await daemon.waitFor('the retry to succeed', async () => (await daemon.status()).teardownQueue.depth === 0);

    const traces = await poll('both delegate DELs in Jaeger', 30_000, async () => {
      const found = await jaeger.search('stewardd', {
        'cni.container_id': rid,
        'cni.plugin.type': 'steward-fixture',
        'cni.command': 'DEL',
      });
      return found.length >= 2 ? found : undefined;
    });
    const inRequest = traces.find((t) => named(t, 'cni DEL').length === 1);
    assert.ok(inRequest, "the DEL's own trace");
    assert.equal(inRequest.traceID, RUNTIME_TRACE.replace(/^4/, '5'));
    const failed = named(inRequest, 'delegate steward-fixture DEL')[0]!;
    assert.equal(parentOf(failed), named(inRequest, 'cni DEL')[0]!.spanID);
    assert.equal(tags(failed)['cni.code'], 11);
    assert.equal(tags(failed)['otel.status_code'], 'ERROR');
    assert.equal(tags(failed)['process.exit.code'], 1);

    const retried = traces.filter((t) => t !== inRequest);
    assert.equal(retried.length, 1, 'one retry');
    const retry = named(retried[0]!, 'delegate steward-fixture DEL')[0]!;
    const [teardown] = named(retried[0]!, 'teardown');
    assert.ok(teardown, 'the retry is a teardown span');
    assert.equal(parentOf(teardown), undefined, 'the root of a trace of its own');
    assert.deepEqual(
      teardown.references.filter((r) => r.refType !== 'CHILD_OF').map((r) => [r.traceID, r.spanID]),
      [[inRequest.traceID, named(inRequest, 'cni DEL')[0]!.spanID]],
      'linked to the DEL request that left it',
    );
    assert.equal(tags(teardown)['cni.container_id'], rid);
    assert.equal(tags(teardown)['steward.teardown.done'], true);
    assert.equal(typeof tags(teardown)['steward.attachment.id'], 'number');
    assert.equal(parentOf(retry), teardown.spanID, "the retry's delegate run is the teardown's child");
    assert.equal(tags(retry)['steward.background'], true);
    const retryLines = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(`"traceId":"${retry.traceID}"`));
    assert.ok(
      retryLines.some((l) => l.includes(rid)),
      "the retry's log lines carry its trace id",
    );
    assert.equal(tags(retry)['cni.ifname'], 'eth0');
    assert.equal(tags(retry)['cni.network'], 'retrynet');
    assert.equal(tags(retry)['cni.code'], 0);
    const dels = envLog(fxRetry).filter((c) => c.command === 'DEL');
    assert.equal(dels.length, 2);
    assert.equal(dels[1]!.env.TRACEPARENT, `00-${retry.traceID}-${retry.spanID}-01`);
  });

  it("a failed ADD's rollback: each delegate DEL it runs is in the ADD's trace, marked as the rollback's", async () => {
    const fxFail = join(env.dir, 'fx-fail');
    const failConf = stewardConf(daemon.socket, '1.0.0', [
      delegate('failnet', '1.0.0', [
        bridgePlugin({ bridge, subnet, dataDir }),
        fixturePlugin(fxFail, { failAdd: true }),
      ]),
    ]);
    const fid = 'trace-rollback';
    const traceId = RUNTIME_TRACE.replace(/^4/, '6');
    const res = await runShim({ command: 'ADD', containerId: fid, netns: env.netns() }, failConf, {
      TRACEPARENT: `00-${traceId}-${RUNTIME_SPAN}-01`,
    });
    assert.notEqual(res.code, 0, 'the ADD fails');
    const t = await poll('the rollback in the ADD trace', 30_000, async () => {
      const x = await jaeger.trace(traceId);
      return x && named(x, 'delegate bridge DEL').length === 1 && named(x, 'delegate steward-fixture DEL').length === 1
        ? x
        : undefined;
    });
    const [request] = named(t, 'cni ADD');
    assert.ok(request);
    assert.equal(tags(request)['otel.status_code'], 'ERROR');
    for (const op of ['delegate bridge DEL', 'delegate steward-fixture DEL']) {
      const d = named(t, op)[0]!;
      assert.equal(parentOf(d), request.spanID, op);
      assert.equal(tags(d)['steward.rollback'], true, op);
    }
    for (const d of named(t, 'delegate bridge ADD')) assert.equal(tags(d)['steward.rollback'], undefined);
  });

  it('a frozen, then a stopped, collector: ADD and DEL still answer promptly, and spans past the queue are dropped and counted', async () => {
    // A queue of 8 spans (an ADD+DEL pair ends about 14) and a 15 s export timeout: a call that
    // waited for the collector would take that long, far beyond what a loaded machine adds.
    const small = new Daemon(env, {
      name: 'small-queue',
      args: [...FAST_RETRY, '--otlp-endpoint', jaeger.otlpEndpoint, '--otlp-queue-size', '8'],
      env: { OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_EXPORTER_OTLP_TIMEOUT: String(EXPORT_TIMEOUT_MS) },
    });
    await small.start();
    const fxs = join(env.dir, 'fx-small');
    const c = stewardConf(small.socket, '1.0.0', [delegate('smallnet', '1.0.0', [fixturePlugin(fxs)])]);
    const pairs = async (tag: string, n: number) => {
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const netns = env.netns();
        for (const command of ['ADD', 'DEL']) {
          const r = await runShim({ command, containerId: `${tag}-${i}`, netns }, c);
          assert.equal(r.code, 0, `${command} ${tag}-${i}: ${r.stdout}`);
          times.push(r.ms);
        }
      }
      return times;
    };
    const series = (reason: string) => `steward_trace_spans_dropped_total{reason="${reason}"}`;
    assert.equal(await metric(small, series('queue_full')), 0);

    jaeger.freeze();
    const frozen = await pairs('frozen', 6);
    const prompt = (times: number[], what: string) =>
      assert.ok(
        Math.max(...times) < EXPORT_TIMEOUT_MS / 2,
        `calls while ${what}: ${times.map(Math.round).join(' ')} ms`,
      );
    prompt(frozen, 'the collector is frozen');
    const queueFull = await metric(small, series('queue_full'));
    assert.ok(queueFull > 0, 'the queue filled and spans were dropped');
    await poll('the frozen batch to be given up', 3 * EXPORT_TIMEOUT_MS, async () =>
      (await metric(small, series('export_failed'))) > 0 ? true : undefined,
    );

    await jaeger.stop();
    const stopped = await pairs('stopped', 4);
    prompt(stopped, 'the collector is down');
    const failedBefore = await metric(small, series('export_failed'));
    // A refused connection is retried (1 s, 1.5 s, … backoff) within the export timeout.
    await poll('exports to the stopped collector to fail and be counted', 3 * EXPORT_TIMEOUT_MS, async () =>
      (await metric(small, series('export_failed'))) > failedBefore ? true : undefined,
    );
    // Stopping does not wait for the collector either (the flush at shutdown is bounded).
    const t0 = performance.now();
    assert.equal(await small.stop(), 0);
    assert.ok(performance.now() - t0 < 15_000);
  });
});
