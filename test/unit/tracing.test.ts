// The daemon's tracing (daemon/src/tracing/, tracing/export.ts, config-checks.ts tracingConfig), without a
// process: where the endpoint comes from; off, no span and the runtime's context handed on as it
// came; on (an in-memory exporter), the request span, its admission, queue + journal, delegate and
// commit spans and what the delegate's environment gets; each request in its own context whatever
// callback serves it; the log lines' traceId; the drops counted from the SDK's own processor.

import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { context, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { parse } from 'yaml';
import { CniError, ErrorCode, type CniRequestBody } from '@cni-steward/shared';
import { tracingConfig } from '../../daemon/src/config-checks.js';
import { createLogger } from '../../daemon/src/log.js';
import { Metrics } from '../../daemon/src/metrics.js';
import { startExport } from '../../daemon/src/tracing/export.js';
import { ATTR, inRequestContext, traceLogFields } from '../../daemon/src/tracing/context.js';
import { ADMISSION_SPAN_MIN_MS, Tracing } from '../../daemon/src/tracing/tracing.js';
import { REPO } from '../helpers/env.js';

const RUNTIME_TRACE = '0af7651916cd43dd8448eb211c80319c';
const RUNTIME_SPAN = 'b7ad6b7169203331';
const TRACEPARENT = `00-${RUNTIME_TRACE}-${RUNTIME_SPAN}-01`;

const fakeReq = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;
const res = {} as ServerResponse;
/**
 * The request listener's work: the context noted for `req`, as server.ts wires it; resolves when the
 * listener hands the request on (the first one with a context waits for OpenTelemetry's core).
 */
const arrive = (t: Tracing, req: IncomingMessage) =>
  new Promise<void>((served) => t.listener(() => served())(req, res));

const body = (command = 'ADD'): CniRequestBody => ({
  env: {
    command,
    containerId: 'c1',
    netns: '/run/netns/x',
    ifname: 'eth0',
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0',
    path: '/opt/cni/bin',
  } as CniRequestBody['env'],
  config: { cniVersion: '1.0.0', name: 'steward' },
});

const delegateInfo = { type: 'bridge', command: 'ADD', containerId: 'c1', ifname: 'eth0', network: 'podnet' };

function recording(): { tracing: Tracing; spans: () => ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const tracing = new Tracing({
    tracer: provider.getTracer('test'),
    dropped: () => ({ queue_full: 0, export_failed: 0 }),
    shutdown: () => provider.shutdown(),
  });
  return { tracing, spans: () => exporter.getFinishedSpans() };
}

const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const one = (spans: ReadableSpan[], name: string) => {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one ${name} span among ${spans.map((s) => s.name).join(', ')}`);
  return found[0]!;
};

describe('tracingConfig: where spans go', () => {
  const cfg = (flag: string | undefined, env: NodeJS.ProcessEnv, queue?: string) => {
    const problems: string[] = [];
    const c = tracingConfig(flag, queue, env, problems);
    return { ...c, problems };
  };

  it('is off without a flag or an endpoint in the environment', () => {
    const c = cfg(undefined, {});
    assert.equal(c.url, undefined);
    assert.deepEqual(c.problems, []);
    assert.equal(c.maxQueueSize, 2048);
  });

  it('--otlp-endpoint and OTEL_EXPORTER_OTLP_ENDPOINT are base URLs (/v1/traces appended); the traces endpoint is taken as given', () => {
    assert.equal(cfg('http://c:4318', {}).url, 'http://c:4318/v1/traces');
    assert.equal(cfg('http://c:4318/', {}).url, 'http://c:4318/v1/traces');
    assert.equal(cfg('https://c/otlp/v1/traces', {}).url, 'https://c/otlp/v1/traces');
    assert.equal(cfg(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://n:4318' }).url, 'http://n:4318/v1/traces');
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://n:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/x' };
    assert.equal(cfg(undefined, both).url, 'http://t:1/x');
    assert.equal(cfg('http://flag:4318', both).url, 'http://flag:4318/v1/traces', 'the flag wins');
    assert.equal(cfg(undefined, { ...both, OTEL_SDK_DISABLED: 'true' }).url, undefined);
    assert.equal(cfg(undefined, { ...both, OTEL_TRACES_EXPORTER: 'none' }).url, undefined);
  });

  it('reports a URL that is not http(s), and bad numbers, naming where they came from', () => {
    assert.match(cfg('collector:4318', {}).problems.join(), /--otlp-endpoint must be an http:\/\/ or https:\/\/ URL/);
    assert.match(
      cfg(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://x' }).problems.join(),
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
    assert.match(cfg(undefined, {}, '0').problems.join(), /--otlp-queue-size must be an integer >= 1/);
    assert.match(cfg(undefined, { OTEL_BSP_MAX_QUEUE_SIZE: 'x' }).problems.join(), /OTEL_BSP_MAX_QUEUE_SIZE/);
  });

  it('takes the batch processor knobs from OTEL_BSP_* and the export timeout from OTEL_EXPORTER_OTLP_*TIMEOUT', () => {
    const c = cfg(
      'http://c',
      {
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_SCHEDULE_DELAY: '250',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50',
        OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
      },
      undefined,
    );
    assert.deepEqual(
      [c.maxQueueSize, c.scheduledDelayMs, c.maxExportBatchSize, c.exportTimeoutMs],
      [100, 250, 50, 3000],
    );
    assert.equal(cfg('http://c', { OTEL_BSP_MAX_QUEUE_SIZE: '100' }, '7').maxQueueSize, 7, 'the flag wins');
  });

  it("deploy/daemonset.yaml's commented collector example, uncommented, turns it on", () => {
    const text = readFileSync(join(REPO, 'deploy/daemonset.yaml'), 'utf8');
    const lines = text.split('\n').filter((l) => /^\s*# {1,3}(- name: OTEL_EXPORTER_OTLP_ENDPOINT|value: )/.test(l));
    assert.equal(lines.length, 2, 'the example: one env entry, name and value');
    const [entry] = parse(lines.map((l) => l.replace('# ', '')).join('\n')) as Array<{ name: string; value: string }>;
    const value = entry!.value.replace('$(HOST_IP)', '10.0.0.7');
    assert.equal(cfg(undefined, { [entry!.name]: value }).url, 'http://10.0.0.7:4318/v1/traces');
  });
});

describe('off (no endpoint)', () => {
  it('makes no span: request() just serves, a delegate outside any context gets nothing', async () => {
    const t = new Tracing();
    assert.equal(t.recording, false);
    let described = false;
    assert.equal(
      await t.request('ADD', async (describe) => {
        describe(body());
        described = true;
        return 'ok';
      }),
      'ok',
    );
    assert.ok(described);
    assert.equal(t.delegate(delegateInfo), undefined);
    t.commit(0.001, true);
    assert.deepEqual(t.dropped(), { queue_full: 0, export_failed: 0 });
  });

  it("hands the runtime's context to the delegates unchanged, and names its trace in the log lines", async () => {
    const t = new Tracing();
    const req = fakeReq({ traceparent: TRACEPARENT, tracestate: 'a=1' });
    await arrive(t, req);
    await inRequestContext(req, async () => {
      await new Promise((r) => setImmediate(r));
      const d = t.delegate(delegateInfo);
      assert.deepEqual(d?.env, { TRACEPARENT, TRACESTATE: 'a=1' });
      const onStart = () => undefined;
      assert.equal(d?.onStart(onStart), onStart);
      assert.deepEqual(traceLogFields(), { traceId: RUNTIME_TRACE });
    });
    assert.deepEqual(traceLogFields(), {});
  });

  it('leaves a request without a traceparent in no context at all', async () => {
    const t = new Tracing();
    const req = fakeReq();
    await arrive(t, req);
    assert.equal(
      inRequestContext(req, () => context.active()),
      ROOT_CONTEXT,
    );
  });
});

describe('on (an in-memory exporter)', () => {
  it("one request: its span under the runtime's, admission, queue + journal, the delegate with its own TRACEPARENT, commits", async () => {
    const { tracing, spans } = recording();
    const req = fakeReq({ traceparent: TRACEPARENT, tracestate: 'a=1' });
    await arrive(tracing, req);
    await new Promise((r) => setTimeout(r, 5)); // the request waits for admission
    let env: Record<string, string> = {};
    const pids: number[] = [];
    await inRequestContext(req, () =>
      tracing.request('ADD', async (describe) => {
        describe(body());
        tracing.commit(0.002, true);
        await new Promise((r) => setImmediate(r));
        const d = tracing.delegate(delegateInfo)!;
        env = d.env;
        // The spawner calls onStart from its own channel's callback: in the root context.
        const onStart = d.onStart((p: { pid: number }) => {
          pids.push(p.pid);
          tracing.commit(0.0005, false);
        })!;
        context.with(ROOT_CONTEXT, () => onStart({ pid: 4242 }));
        d.exited({ code: 0, signal: null, timedOut: false });
        d.end();
        return 'result';
      }),
    );
    const all = spans();
    const request = one(all, 'cni ADD');
    assert.equal(request.spanContext().traceId, RUNTIME_TRACE);
    assert.equal(parentId(request), RUNTIME_SPAN);
    assert.equal(request.kind, 1 /* SERVER */);
    assert.equal(request.attributes[ATTR.code], 0);
    assert.equal(request.attributes[ATTR.containerId], 'c1');
    assert.equal(request.attributes[ATTR.network], 'steward');
    assert.equal(request.attributes[ATTR.podNamespace], 'shop');
    assert.equal(request.attributes[ATTR.podName], 'web-0');
    assert.equal(request.attributes[ATTR.podUid], undefined);
    const admission = one(all, 'admission');
    assert.equal(parentId(admission), request.spanContext().spanId);
    assert.deepEqual(admission.startTime, request.startTime, 'the request span starts at its arrival');
    const queue = one(all, 'queue + journal');
    assert.equal(parentId(queue), request.spanContext().spanId);
    const d = one(all, 'delegate bridge ADD');
    assert.equal(parentId(d), request.spanContext().spanId);
    assert.deepEqual(queue.endTime, d.startTime, 'the wait ends where the first delegate starts');
    assert.deepEqual(
      { ...d.attributes },
      {
        [ATTR.pluginType]: 'bridge',
        [ATTR.command]: 'ADD',
        [ATTR.containerId]: 'c1',
        [ATTR.ifname]: 'eth0',
        [ATTR.network]: 'podnet',
        [ATTR.pid]: 4242,
        [ATTR.exitCode]: 0,
        [ATTR.code]: 0,
      },
    );
    assert.deepEqual(env, { TRACEPARENT: `00-${RUNTIME_TRACE}-${d.spanContext().spanId}-01`, TRACESTATE: 'a=1' });
    assert.deepEqual(pids, [4242]);
    const commits = all.filter((s) => s.name === 'journal commit');
    assert.deepEqual(
      commits.map((c) => [parentId(c), c.attributes[ATTR.synced]]),
      [
        [request.spanContext().spanId, true],
        [d.spanContext().spanId, false],
      ],
    );
  });

  it('a request without a context starts a trace of its own; a failed answer carries its CNI code', async () => {
    const { tracing, spans } = recording();
    const req = fakeReq();
    await arrive(tracing, req);
    await assert.rejects(
      inRequestContext(req, () =>
        tracing.request('DEL', async (describe) => {
          describe(body('DEL'));
          throw new CniError(ErrorCode.TryAgainLater, 'later');
        }),
      ),
      /later/,
    );
    const request = one(spans(), 'cni DEL');
    assert.equal(parentId(request), undefined);
    // A traceparent that is not W3C's (the shim drops those; curl may send one) is no context either.
    const bad = fakeReq({ traceparent: `00-${'0'.repeat(32)}-${RUNTIME_SPAN}-01` });
    await arrive(tracing, bad);
    await inRequestContext(bad, () => tracing.request('CHECK', async () => undefined));
    assert.equal(parentId(one(spans(), 'cni CHECK')), undefined);
    assert.notEqual(request.spanContext().traceId, RUNTIME_TRACE);
    assert.equal(request.attributes[ATTR.code], ErrorCode.TryAgainLater);
    assert.equal(request.status.code, 2 /* ERROR */);
    // Served at once, so no admission span, unless this machine itself took that long between the
    // two (a CI run beside other work did): then it spans at least the threshold, never less.
    for (const a of spans().filter((s) => s.name === 'admission')) {
      const ms = (a.endTime[0] - a.startTime[0]) * 1e3 + (a.endTime[1] - a.startTime[1]) / 1e6;
      assert.ok(ms >= ADMISSION_SPAN_MIN_MS, `an admission span of ${ms} ms: below the threshold, none is made`);
    }
  });

  it("each request in its own context, even served from another request's callback; none leaks out", async () => {
    const { tracing, spans } = recording();
    const a = fakeReq({ traceparent: TRACEPARENT });
    const b = fakeReq({ traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` });
    await arrive(tracing, a);
    await arrive(tracing, b);
    await inRequestContext(a, () =>
      tracing.request('ADD', async () => {
        // Admission serves a parked request from whatever callback freed its slot.
        await inRequestContext(b, () => tracing.request('DEL', async () => 'b'));
        return 'a';
      }),
    );
    assert.equal(one(spans(), 'cni DEL').spanContext().traceId, '1'.repeat(32));
    assert.equal(parentId(one(spans(), 'cni DEL')), '2'.repeat(16));
    assert.equal(trace.getSpan(context.active()), undefined);
  });

  it('a delegate outside any request (a teardown retry) is a root naming what it tears down; commits outside a trace make none', () => {
    const { tracing, spans } = recording();
    const d = tracing.delegate({ ...delegateInfo, command: 'DEL' })!;
    d.exited({ code: 1, signal: null, timedOut: false });
    d.end(new CniError(ErrorCode.TryAgainLater, 'DEL failed'));
    tracing.commit(0.001, false);
    const all = spans();
    assert.deepEqual(
      all.map((s) => s.name),
      ['delegate bridge DEL'],
    );
    const s = all[0]!;
    assert.equal(parentId(s), undefined);
    assert.equal(s.attributes[ATTR.background], true);
    assert.equal(s.attributes[ATTR.code], ErrorCode.TryAgainLater);
    assert.equal(s.attributes[ATTR.exitCode], 1);
    assert.equal(s.status.code, 2);
    assert.match(d.env.TRACEPARENT ?? '', new RegExp(`^00-${s.spanContext().traceId}-${s.spanContext().spanId}-01$`));
  });

  it("a STATUS without the runtime's context (containerd asks every 5 s) makes no span, nor do its delegates; with one it is traced", async () => {
    const { tracing, spans } = recording();
    const quiet = fakeReq();
    await arrive(tracing, quiet);
    let env: Record<string, string> | undefined;
    await inRequestContext(quiet, () =>
      tracing.request('STATUS', async () => {
        const d = tracing.delegate({ ...delegateInfo, command: 'STATUS' });
        env = d?.env;
        d?.end();
        tracing.commit(0.001, false);
      }),
    );
    assert.deepEqual(spans(), []);
    assert.deepEqual(env, {}, 'no TRACEPARENT for its delegates');
    const asked = fakeReq({ traceparent: TRACEPARENT });
    await arrive(tracing, asked);
    await inRequestContext(asked, () =>
      tracing.request('STATUS', async () => tracing.delegate({ ...delegateInfo, command: 'STATUS' })!.end()),
    );
    assert.deepEqual(
      spans()
        .map((s) => s.name)
        .sort(),
      ['cni STATUS', 'delegate bridge STATUS', 'queue + journal'],
    );
  });

  it("an unsampled runtime context: no span is recorded, the delegates get the runtime's flags", async () => {
    const { tracing, spans } = recording();
    const req = fakeReq({ traceparent: `00-${RUNTIME_TRACE}-${RUNTIME_SPAN}-00` });
    await arrive(tracing, req);
    let env: Record<string, string> = {};
    await inRequestContext(req, () =>
      tracing.request('ADD', async () => {
        tracing.commit(0.001, true);
        const d = tracing.delegate(delegateInfo)!;
        env = d.env;
        d.end();
      }),
    );
    assert.deepEqual(spans(), []);
    assert.match(env.TRACEPARENT ?? '', new RegExp(`^00-${RUNTIME_TRACE}-[0-9a-f]{16}-00$`));
    assert.equal(TraceFlags.NONE, 0);
  });
});

describe('the log lines and the metric', () => {
  it('pino adds the trace id to every line within a request (the daemon logger mixin)', async () => {
    const lines: string[] = [];
    const dest = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = createLogger('info', dest as never, traceLogFields);
    const t = new Tracing();
    const req = fakeReq({ traceparent: TRACEPARENT });
    await arrive(t, req);
    inRequestContext(req, () => log.info({ containerId: 'c1' }, 'inside'));
    log.info('outside');
    assert.equal(JSON.parse(lines[0]!).traceId, RUNTIME_TRACE);
    assert.equal(JSON.parse(lines[0]!).containerId, 'c1');
    assert.equal(JSON.parse(lines[1]!).traceId, undefined);
  });

  it('steward_trace_spans_dropped_total has both reasons from the first scrape, then the counts', async () => {
    const source = {
      counts: () => ({ attachments: {}, steps: {} }),
      oldestPendingTeardownAt: () => undefined,
      countPendingTeardowns: () => 0,
    };
    const m = new Metrics(source);
    assert.match(await m.registry.metrics(), /^steward_trace_spans_dropped_total\{reason="queue_full"\} 0$/m);
    assert.match(await m.registry.metrics(), /^steward_trace_spans_dropped_total\{reason="export_failed"\} 0$/m);
    m.setTraceDropped(() => ({ queue_full: 5, export_failed: 2 }));
    assert.match(await m.registry.metrics(), /^steward_trace_spans_dropped_total\{reason="queue_full"\} 5$/m);
    assert.match(await m.registry.metrics(), /^steward_trace_spans_dropped_total\{reason="export_failed"\} 2$/m);
  });
});

/** A port nothing listens on (taken, then let go): every export to it is refused. */
function unusedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

describe('trace-export: the SDK pipeline', () => {
  it("counts spans dropped at the full queue and batches the collector did not take, from the processor's own counter", async () => {
    // A port nothing listens on: every export fails (connection refused).
    const port = await unusedPort();
    const quiet = createLogger('silent');
    const ex = startExport({
      url: `http://127.0.0.1:${port}/v1/traces`,
      maxQueueSize: 2,
      maxExportBatchSize: 512,
      scheduledDelayMs: 60_000,
      exportTimeoutMs: 1000,
      version: 'test',
      log: quiet,
    });
    const t = new Tracing(ex);
    // Two fill the queue and go out as a batch (its size is capped at the queue's); two more wait
    // behind that export; the other 16 are dropped at once.
    for (let i = 0; i < 20; i++) t.delegate(delegateInfo)!.end();
    assert.equal(ex.dropped().queue_full, 16);
    const deadline = Date.now() + 15_000;
    while (ex.dropped().export_failed < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(ex.dropped(), { queue_full: 16, export_failed: 4 });
    const t0 = Date.now();
    await t.shutdown(500);
    assert.ok(Date.now() - t0 < 2000, 'shutdown is bounded');
  });

  it('counts a batch the collector trickles its answer to as failed at the export timeout, not never', async () => {
    // 200 with a long body, a byte every 100 ms: the HTTP exporter's idle timeout never fires.
    const trickles = new Set<NodeJS.Timeout>();
    const collector = createHttpServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '1000000' });
      const t = setInterval(() => res.write('x'), 100);
      trickles.add(t);
      res.on('close', () => clearInterval(t));
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
    const ex = startExport({
      url: `http://127.0.0.1:${(collector.address() as { port: number }).port}/v1/traces`,
      maxQueueSize: 8,
      maxExportBatchSize: 8,
      scheduledDelayMs: 10,
      exportTimeoutMs: 1500,
      version: 'test',
      log: createLogger('silent'),
    });
    const t = new Tracing(ex);
    try {
      for (let i = 0; i < 3; i++) t.delegate(delegateInfo)!.end();
      const deadline = Date.now() + 10_000;
      while (ex.dropped().export_failed < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(ex.dropped(), { queue_full: 0, export_failed: 3 });
    } finally {
      for (const i of trickles) clearInterval(i);
      collector.closeAllConnections();
      collector.close();
      await t.shutdown(500);
    }
  });

  it("logs an export failure once, with its component once and no request's traceId (the export's timer may be a request's)", async () => {
    const port = await unusedPort();
    const lines: string[] = [];
    const dest = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const ex = startExport({
      url: `http://127.0.0.1:${port}/v1/traces`,
      maxQueueSize: 8,
      maxExportBatchSize: 8,
      scheduledDelayMs: 10,
      exportTimeoutMs: 1000,
      version: 'test',
      log: createLogger('warn', dest as never, traceLogFields),
    });
    const t = new Tracing(ex);
    const traced = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: RUNTIME_TRACE,
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
    });
    context.with(traced, () => t.delegate(delegateInfo)!.end());
    const deadline = Date.now() + 15_000;
    while (!lines.some((l) => l.includes('trace export')) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const line = lines.find((l) => l.includes('trace export'));
    assert.ok(line, 'the failure is logged');
    assert.equal(line.match(/"component":/g)?.length, 1, line);
    assert.equal(JSON.parse(line).component, 'tracing');
    assert.equal(JSON.parse(line).traceId, undefined, line);
    await t.shutdown(500);
  });
});
