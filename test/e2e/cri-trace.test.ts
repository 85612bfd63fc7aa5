// Issue 40's first done-when, on Kubernetes' own call path: one pod through containerd 1.6's CRI
// plugin (the project's kubelet-like client, test/helpers/cri/), stewardd on the node exporting its
// traces over OTLP/HTTP to a real Jaeger the test starts (test/helpers/jaeger.ts), the traces read back
// through Jaeger's query API by the tag cni.container_id=<sandbox id>. RunPodSandbox's ADD and
// StopPodSandbox's DEL each give one trace: the `cni ADD`/`cni DEL` request span with the pod's names
// from the CNI_ARGS the CRI plugin passed, its `queue wait` and `queue + journal` spans, its journal
// commits, a `delegate <type> <COMMAND>` span per delegate plugin of the installed chain (exit code 0),
// and the daemon's log lines for that container carrying the trace id. RemovePodSandbox stops the
// sandbox again and so runs a second DEL: stewardd answers it from the first's tombstone, a trace of
// its own with the request span and no delegate span.
//
// The kubelet-like client sends its trace context the way a traced kubelet does (gRPC metadata
// `traceparent` on RunPodSandbox), and containerd 1.6 does not carry it on to CNI: its libcni (1.1.x)
// predates TRACEPARENT (containernetworking/cni PR #1173), and this Debian build (1.6.20~ds1) has no
// tracing of its own at all (no tracing plugin in `containerd config default`, no `traceparent` string
// in the binary). So stewardd's request span is the root of a trace of its own, and nothing reaches
// Jaeger under the kubelet's trace id; asserted here, and said in docs/tracing.md ("Through containerd
// 1.6's CRI"). The last test PLAYS containerd 2.x's call (go-cni/libcni with TRACEPARENT in the
// plugin's environment): it executes the installed shim as libcni would, with the CRI plugin's CNI_ARGS
// for this pod and a runtime's TRACEPARENT; that is not containerd 2.x (not packaged here), only its
// call, and stewardd's span is then that span's child.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { TestEnv } from '../helpers/env.js';
import { Jaeger, jaegerSkipReason, tags, type JaegerSpan, type JaegerTrace } from '../helpers/jaeger.js';
import { fixturePlugin } from '../helpers/netconf.js';
import { baseSkipReason } from '../helpers/runtimes/skip.js';
import { execPlugin, cniEnv } from '../helpers/shim.js';
import { CriClient, runtimeServiceCtor } from '../helpers/cri/client.js';
import { Kubelet, type Pod } from '../helpers/cri/kubelet.js';
import { CRI_COMMANDS, startCriSuite, type CriSuite } from '../helpers/cri/suite.js';
import { figure, journaledCniArgs, parseCniArgs } from '../helpers/cri/scenario.js';
import { poll } from '../helpers/poll.js';

const WHAT = "a pod's trace through containerd 1.6's CRI plugin into a real Jaeger";

// Jaeger first (stewardd starts with the node and takes its endpoint), in an env of its own, closed
// after the suite's: the process is killed and its dir removed whatever happens.
const jaegerEnv = new TestEnv('e2e-cri-trace-jaeger');
const jaeger = new Jaeger(jaegerEnv);
const noJaeger = jaegerSkipReason();
let suite: CriSuite;
try {
  if (noJaeger === undefined && baseSkipReason(CRI_COMMANDS) === undefined) await jaeger.start();
  suite = await startCriSuite('e2e-cri-trace', WHAT, {
    skipReason: noJaeger,
    daemonArgs: () => ['--otlp-endpoint', jaeger.otlpEndpoint],
    daemonEnv: { OTEL_BSP_SCHEDULE_DELAY: '100' },
  });
} catch (e) {
  await jaegerEnv.close();
  throw e;
}
const { env, node, kubelet, skip } = suite;

after(async () => {
  try {
    await suite.finish();
  } finally {
    await jaegerEnv.close();
  }
});

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const named = (t: JaegerTrace, op: string) => t.spans.filter((s) => s.operationName === op);
const parentOf = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

/** The fixture's recorded environments (recordEnv: one JSON line per call). */
function envLog(dir: string): Array<{ command: string; containerId: string; env: Record<string, string> }> {
  const f = join(dir, 'env.log');
  if (!existsSync(f)) return [];
  return readFileSync(f, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

/** stewardd's log lines between bytes `from` and `to` that name the container, parsed. */
function logLines(file: string, from: number, containerId: string, to?: number): Array<Record<string, unknown>> {
  return readFileSync(file)
    .subarray(from, to)
    .toString('utf8')
    .split('\n')
    .filter((l) => l.includes(containerId))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/**
 * The one trace of `command` for this container holding the request span, its two queue spans and a
 * delegate span per plugin of `chain` (the spans of a trace reach Jaeger in batches: polled until all did).
 */
async function requestTrace(command: 'ADD' | 'DEL', containerId: string, chain: string[]): Promise<JaegerTrace> {
  const complete = (t: JaegerTrace) =>
    named(t, `cni ${command}`).length === 1 &&
    named(t, 'queue wait').length === 1 &&
    named(t, 'queue + journal').length === 1 &&
    chain.every((type) => named(t, `delegate ${type} ${command}`).length === 1);
  const traces = await poll(`the ${command} trace of ${containerId} in Jaeger`, 60_000, async () => {
    const found = await jaeger.search('stewardd', { 'cni.container_id': containerId, 'cni.command': command });
    return found.some(complete) ? found : undefined;
  });
  const withRequest = traces.filter((t) => named(t, `cni ${command}`).length > 0);
  assert.equal(withRequest.length, 1, `one ${command} request for ${containerId}: ${withRequest.length}`);
  return withRequest[0]!;
}

/**
 * What every request trace through the CRI plugin shows: the request span (server, the pod's names
 * as the kubelet gave them and the CRI plugin passed them in CNI_ARGS, code 0), its `queue wait` and
 * `queue + journal` children before the first delegate, its journal commits, and one delegate span
 * per plugin of the chain, each the request's child with exit code 0, in the chain's order (DEL: reversed).
 */
function assertRequest(
  trace: JaegerTrace,
  command: 'ADD' | 'DEL',
  containerId: string,
  pod: Pod,
  cniArgs: Record<string, string>,
  chain: string[],
): { request: JaegerSpan; delegates: JaegerSpan[] } {
  const [request] = named(trace, `cni ${command}`);
  assert.ok(request);
  assert.equal(trace.processes[request.processID]?.serviceName, 'stewardd');
  const t = tags(request);
  assert.equal(t['span.kind'], 'server');
  assert.equal(t['cni.command'], command);
  assert.equal(t['cni.container_id'], containerId);
  assert.equal(t['cni.network'], 'steward');
  assert.equal(t['cni.ifname'], 'eth0');
  assert.equal(t['cni.code'], 0);
  assert.deepEqual(
    [t['k8s.namespace.name'], t['k8s.pod.name'], t['k8s.pod.uid']],
    [cniArgs.K8S_POD_NAMESPACE, cniArgs.K8S_POD_NAME, cniArgs.K8S_POD_UID],
    'the pod as CNI_ARGS named it',
  );
  assert.deepEqual(
    [cniArgs.K8S_POD_NAMESPACE, cniArgs.K8S_POD_NAME, cniArgs.K8S_POD_UID],
    [pod.namespace, pod.name, pod.uid],
  );

  const delegates = chain.map((type) => {
    const [d] = named(trace, `delegate ${type} ${command}`);
    assert.ok(d, `delegate ${type} ${command}`);
    assert.equal(parentOf(d), request.spanID, `delegate ${type} ${command} is the request's child`);
    const dt = tags(d);
    assert.equal(dt['cni.plugin.type'], type);
    assert.equal(dt['cni.command'], command);
    assert.equal(dt['cni.container_id'], containerId);
    assert.equal(dt['process.exit.code'], 0, `delegate ${type} ${command}`);
    assert.equal(dt['cni.code'], 0);
    assert.equal(dt['steward.rollback'], undefined);
    return d;
  });
  const order = [...delegates].sort((a, b) => a.startTime - b.startTime).map((d) => tags(d)['cni.plugin.type']);
  assert.deepEqual(order, command === 'ADD' ? chain : [...chain].reverse(), `the delegates' order in the ${command}`);
  const first = delegates.reduce((a, b) => (a.startTime <= b.startTime ? a : b));
  for (const op of ['queue wait', 'queue + journal']) {
    const q = named(trace, op).find((s) => parentOf(s) === request.spanID);
    assert.ok(q, `${op}, the request's child`);
    assert.ok(q.startTime + q.duration <= first.startTime + 1, `${op} ends before the first delegate starts`);
  }
  return { request, delegates };
}

describe("a pod's trace through containerd 1.6's CRI plugin, read back from a real Jaeger", { skip }, () => {
  const fx = join(env.dir, 'fx-trace');
  /** The delegate plugins of the chain the test installed, as 00-steward.conflist holds them. */
  let chain: string[] = [];
  let pod: Pod;
  let sandbox = '';
  let cniArgs: Record<string, string> = {};
  const kubeletTrace = hex(16);
  const kubeletSpan = hex(8);

  it('the kubelet-like client sends its trace context as gRPC metadata `traceparent` on RunPodSandbox', async () => {
    // On the wire: a RuntimeService of the test's own, recording what RunPodSandbox brought.
    const socket = join(env.dir, 'metadata-probe.sock');
    const seen: string[][] = [];
    const server = new grpc.Server();
    server.addService(runtimeServiceCtor().service, {
      RunPodSandbox: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        seen.push(call.metadata.get('traceparent').map(String));
        cb(null, { podSandboxId: 'probe' });
      },
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
    );
    const client = new CriClient(socket, 10_000);
    try {
      const k = new Kubelet(client, { cgroupParent: '/probe', logRoot: '/probe', tag: env.tag });
      const traceparent = `00-${kubeletTrace}-${kubeletSpan}-01`;
      const r = await k.runPod(k.pod('probe'), { traceparent });
      assert.equal(r.id, 'probe', r.error?.message);
      await k.runPod(k.pod('probe-untraced'));
      assert.deepEqual(seen, [[traceparent], []], 'traceparent when asked, nothing otherwise');
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it("RunPodSandbox: the ADD's trace in Jaeger holds the request, its queue wait, queue + journal, a synced journal commit and every delegate of the installed chain; its log lines carry its trace id; the kubelet's context is not carried through containerd 1.6", async () => {
    const n = node!;
    const k = kubelet!;
    await n.setChain([fixturePlugin(fx, { recordEnv: true })]);
    const installed = JSON.parse(readFileSync(join(n.confDir, '00-steward.conflist'), 'utf8'));
    assert.equal(installed.plugins[0].type, 'steward');
    chain = (installed.plugins[0].delegates[0].plugins as Array<{ type: string }>).map((p) => p.type);
    assert.deepEqual(chain, ['bridge', 'portmap', 'steward-fixture'], 'the chain the test installed');

    pod = k.pod('traced', 'shop');
    const run = await k.runPod(pod, { traceparent: `00-${kubeletTrace}-${kubeletSpan}-01` });
    assert.ok(run.id, `RunPodSandbox: ${run.error?.message}`);
    sandbox = run.id;
    cniArgs = parseCniArgs(journaledCniArgs(n, [sandbox]).get(sandbox) ?? '');
    assert.equal(cniArgs.K8S_POD_INFRA_CONTAINER_ID, sandbox, 'the CNI_ARGS the CRI plugin passed');

    const trace = await requestTrace('ADD', sandbox, chain);
    const { request, delegates } = assertRequest(trace, 'ADD', sandbox, pod, cniArgs, chain);
    const commits = named(trace, 'journal commit');
    assert.ok(
      commits.some((c) => tags(c)['steward.journal.synced'] === true && parentOf(c) === request.spanID),
      "the chain's synced journal commit is the request's",
    );

    // containerd 1.6 passed no TRACEPARENT: stewardd's trace is a root of its own, not the kubelet's.
    assert.equal(parentOf(request), undefined, 'the request span has no parent: containerd 1.6 passed no context');
    assert.notEqual(trace.traceID, kubeletTrace);
    assert.equal(await jaeger.trace(kubeletTrace), undefined, "nothing reached Jaeger in the kubelet's trace");

    // The delegates ran in stewardd's trace: the fixture got its own span's TRACEPARENT.
    const fixtureSpan = delegates[chain.indexOf('steward-fixture')]!;
    const call = envLog(fx).find((c) => c.command === 'ADD' && c.containerId === sandbox);
    assert.ok(call, 'the fixture recorded its environment');
    assert.equal(call.env.TRACEPARENT, `00-${trace.traceID}-${fixtureSpan.spanID}-01`);

    const lines = logLines(n.daemon.logFile, 0, sandbox);
    assert.ok(lines.length > 0, 'stewardd logged the ADD');
    for (const l of lines) assert.equal(l.traceId, trace.traceID, `a log line of the ADD: ${JSON.stringify(l)}`);
    assert.ok(!readFileSync(n.daemon.logFile, 'utf8').includes(kubeletTrace), "no log line names the kubelet's trace");
    figure('ADD trace', {
      traceId: trace.traceID,
      spans: trace.spans.length,
      requestMs: request.duration / 1000,
      delegates: delegates.map((d) => [d.operationName, d.duration / 1000]),
      commits: commits.length,
      logLines: lines.length,
      kubeletTraceInJaeger: false,
    });
  });

  it("StopPodSandbox: the DEL's trace likewise, every delegate's DEL under the request, its log lines carrying its trace id; RemovePodSandbox: containerd 1.6's second DEL, a trace of its own", async () => {
    assert.ok(sandbox, 'the ADD test ran');
    const n = node!;
    const k = kubelet!;
    const logFrom = statSync(n.daemon.logFile).size;
    const stop = await k.stopSandbox(sandbox);
    assert.ok(stop.ok && stop.attempts === 1, `StopPodSandbox: ${stop.lastError}`);
    assert.deepEqual(n.leases(), [], 'the lease is released');

    const trace = await requestTrace('DEL', sandbox, chain);
    const { request, delegates } = assertRequest(trace, 'DEL', sandbox, pod, cniArgs, chain);
    assert.equal(parentOf(request), undefined, 'a root of its own: containerd 1.6 passes no context');
    const adds = await jaeger.search('stewardd', { 'cni.container_id': sandbox, 'cni.command': 'ADD' });
    assert.ok(!adds.some((t) => t.traceID === trace.traceID), "the DEL's trace is not the ADD's");
    const commits = named(trace, 'journal commit');
    assert.ok(commits.length > 0, 'the teardown was journaled');

    const fixtureSpan = delegates[chain.indexOf('steward-fixture')]!;
    const call = envLog(fx).find((c) => c.command === 'DEL' && c.containerId === sandbox);
    assert.equal(call?.env.TRACEPARENT, `00-${trace.traceID}-${fixtureSpan.spanID}-01`);

    const logMid = statSync(n.daemon.logFile).size;
    const lines = logLines(n.daemon.logFile, logFrom, sandbox, logMid);
    assert.ok(lines.length > 0, 'stewardd logged the DEL');
    for (const l of lines) assert.equal(l.traceId, trace.traceID, `a log line of the DEL: ${JSON.stringify(l)}`);

    // RemovePodSandbox: containerd's CRI plugin stops the sandbox again first ("Forcibly stopping
    // sandbox"), and that stop tears the network down again: a second CNI DEL for a sandbox whose netns
    // it already removed. stewardd answers it from the DEL's tombstone: no delegate runs.
    await n.cri.removePodSandbox(sandbox);
    assert.deepEqual(await k.sandboxesOf(pod), []);
    const again = await poll("RemovePodSandbox's DEL in Jaeger", 60_000, async () => {
      const found = await jaeger.search('stewardd', { 'cni.container_id': sandbox, 'cni.command': 'DEL' });
      const others = found.filter((t) => t.traceID !== trace.traceID && named(t, 'cni DEL').length > 0);
      return others.length > 0 ? others : undefined;
    });
    assert.equal(again.length, 1, 'one more DEL');
    const second = again[0]!;
    const [req2] = named(second, 'cni DEL');
    assert.ok(req2);
    assert.equal(parentOf(req2), undefined);
    const t2 = tags(req2);
    assert.equal(t2['cni.code'], 0);
    assert.equal(t2['cni.container_id'], sandbox);
    assert.equal(t2['k8s.pod.uid'], pod.uid);
    assert.deepEqual(
      second.spans.filter((s) => s.operationName.startsWith('delegate ')).map((s) => s.operationName),
      [],
      'no delegate ran again',
    );
    const lines2 = logLines(n.daemon.logFile, logMid, sandbox);
    assert.ok(
      lines2.some((l) => /tombstone/.test(String(l.msg))),
      `the second DEL was answered from the tombstone: ${JSON.stringify(lines2)}`,
    );
    for (const l of lines2)
      assert.equal(l.traceId, second.traceID, `a log line of the second DEL: ${JSON.stringify(l)}`);
    figure('DEL traces', {
      stop: {
        traceId: trace.traceID,
        spans: trace.spans.length,
        requestMs: request.duration / 1000,
        delegates: delegates.map((d) => [d.operationName, d.duration / 1000]),
        commits: commits.length,
        syncedCommits: commits.filter((c) => tags(c)['steward.journal.synced'] === true).length,
        logLines: lines.length,
      },
      remove: {
        traceId: second.traceID,
        spans: second.spans.map((s) => s.operationName),
        requestMs: req2.duration / 1000,
        logLines: lines2.length,
        logSample: lines2.map((l) => l.msg).slice(0, 5),
      },
    });
  });

  it("PLAYED, not containerd 2.x: the installed shim executed as containerd 2.x through go-cni and a libcni with TRACEPARENT (cni PR #1173) does, with this pod's CNI_ARGS and a runtime's TRACEPARENT: stewardd's request is that span's child, in the runtime's trace", async () => {
    assert.ok(sandbox, 'the ADD test ran');
    const n = node!;
    const installed = JSON.parse(readFileSync(join(n.confDir, '00-steward.conflist'), 'utf8'));
    // libcni's conf for the list's one plugin: name and cniVersion injected, runtimeConfig for the
    // capabilities it declares (containerd's CRI always passes portMappings, empty without hostPorts).
    const plugin = installed.plugins[0] as Record<string, unknown> & { capabilities?: Record<string, boolean> };
    const conf: Record<string, unknown> = { ...plugin, name: installed.name, cniVersion: installed.cniVersion };
    if (plugin.capabilities?.portMappings) conf.runtimeConfig = { portMappings: [] };
    // A sandbox id and netns of its own (the pod's are gone); the rest of CNI_ARGS as the CRI plugin sent it.
    const id = hex(32);
    const args = Object.entries({ ...cniArgs, K8S_POD_INFRA_CONTAINER_ID: id })
      .map(([key, v]) => `${key}=${v}`)
      .join(';');
    const netns = env.netns();
    const runtimeTrace = hex(16);
    const shim = join(n.binDir, 'steward');
    const exec = (command: 'ADD' | 'DEL', span: string, stdin: Record<string, unknown>) =>
      execPlugin(
        shim,
        {
          ...cniEnv({ command, containerId: id, netns, args, path: n.binDir }),
          TRACEPARENT: `00-${runtimeTrace}-${span}-01`,
        },
        JSON.stringify(stdin),
      );
    const addSpan = hex(8);
    const add = await exec('ADD', addSpan, conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    // DEL as libcni sends it: the cached ADD result as prevResult.
    const delSpan = hex(8);
    const del = await exec('DEL', delSpan, { ...conf, prevResult: add.json });
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.deepEqual(n.leases(), [], 'the played pod left no lease');

    const trace = await poll("the runtime's trace in Jaeger", 60_000, async () => {
      const t = await jaeger.trace(runtimeTrace);
      return t && ['ADD', 'DEL'].every((c) => chain.every((type) => named(t, `delegate ${type} ${c}`).length === 1))
        ? t
        : undefined;
    });
    for (const [command, span] of [
      ['ADD', addSpan],
      ['DEL', delSpan],
    ] as const) {
      const { request, delegates } = assertRequest(trace, command, id, pod, cniArgs, chain);
      assert.equal(parentOf(request), span, `the ${command} request span's parent is the runtime's span`);
      const fixtureSpan = delegates[chain.indexOf('steward-fixture')]!;
      const call = envLog(fx).find((c) => c.command === command && c.containerId === id);
      assert.equal(call?.env.TRACEPARENT, `00-${runtimeTrace}-${fixtureSpan.spanID}-01`);
    }
    figure('played containerd 2.x call', { traceId: runtimeTrace, spans: trace.spans.length });
  });
});
