// The kubelet-like CRI driver (test/helpers/cri/) against a fake runtime: a real gRPC server on a
// Unix socket serving runtime.proto's RuntimeService, so what the e2e suite counts (StopPodSandbox
// attempts, NotFound as stopped, remove only after stop) and what it sends (the sandbox config
// through our proto) is checked without containerd.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { CriClient, runtimeServiceCtor } from '../helpers/cri/client.js';
import { Kubelet } from '../helpers/cri/kubelet.js';

type Handler = (req: any) => { error?: { code: number; details: string }; reply?: unknown };

const dir = mkdtempSync(join(tmpdir(), 'stw-cri-unit-'));
const socket = join(dir, 'cri.sock');
const calls: Array<{ method: string; req: any }> = [];
const handlers: Record<string, Handler> = {};
let server: grpc.Server;
let client: CriClient;

function serve(method: string) {
  return (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => {
    calls.push({ method, req: call.request });
    const handler: Handler = handlers[method] ?? (() => ({ reply: {} }));
    const out = handler(call.request);
    if (out.error) cb({ code: out.error.code, details: out.error.details } as grpc.ServiceError, null);
    else cb(null, out.reply ?? {});
  };
}

before(async () => {
  server = new grpc.Server();
  const methods = [
    'Version',
    'RunPodSandbox',
    'StopPodSandbox',
    'RemovePodSandbox',
    'PodSandboxStatus',
    'ListPodSandbox',
    'Status',
  ];
  server.addService(runtimeServiceCtor().service, Object.fromEntries(methods.map((m) => [m, serve(m)])));
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  client = new CriClient(socket, 10_000);
});

after(async () => {
  client.close();
  await new Promise<void>((r) => server.tryShutdown(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  calls.length = 0;
  for (const k of Object.keys(handlers)) delete handlers[k];
});

function kubelet(): Kubelet {
  const k = new Kubelet(client, { cgroupParent: '/stw-unit', logRoot: '/var/log/pods', tag: 'unit' });
  k.stopIntervalMs = 20;
  return k;
}

describe('kubelet-like CRI driver', () => {
  test('RunPodSandbox carries the metadata, pod labels, cgroup parent, port mappings and runtime handler the kubelet sends', async () => {
    handlers.RunPodSandbox = () => ({ reply: { podSandboxId: 'a'.repeat(64) } });
    const k = kubelet();
    const pod = k.pod('web', 'shop');
    const r = await k.runPod(pod, {
      attempt: 2,
      handler: 'stw-plain',
      portMappings: [{ protocol: 'TCP', containerPort: 80, hostPort: 8080 }],
    });
    assert.equal(r.id, 'a'.repeat(64));
    const { req } = calls.find((c) => c.method === 'RunPodSandbox')!;
    assert.equal(req.runtimeHandler, 'stw-plain');
    assert.deepEqual(req.config.metadata, { name: 'web', namespace: 'shop', uid: pod.uid, attempt: 2 });
    assert.equal(req.config.labels['io.kubernetes.pod.uid'], pod.uid);
    assert.equal(req.config.labels['io.kubernetes.pod.namespace'], 'shop');
    assert.equal(req.config.linux.cgroupParent, '/stw-unit');
    assert.equal(req.config.linux.securityContext.namespaceOptions.network, 'POD');
    assert.deepEqual(req.config.portMappings, [{ protocol: 'TCP', containerPort: 80, hostPort: 8080, hostIp: '' }]);
  });

  test("a failed RunPodSandbox is an outcome with the runtime's code and message, not a throw", async () => {
    handlers.RunPodSandbox = () => ({
      error: { code: grpc.status.UNKNOWN, details: 'failed to setup network for sandbox: boom' },
    });
    const r = await kubelet().runPod(kubelet().pod('x'));
    assert.equal(r.id, undefined);
    assert.equal(r.error?.code, grpc.status.UNKNOWN);
    assert.match(r.error!.details, /boom/);
  });

  test('StopPodSandbox is retried until it succeeds, and the attempts are counted', async () => {
    let n = 0;
    handlers.StopPodSandbox = () =>
      ++n < 3 ? { error: { code: grpc.status.UNKNOWN, details: `failed to destroy network (${n})` } } : { reply: {} };
    const s = await kubelet().stopSandbox('id1');
    assert.deepEqual(
      { ok: s.ok, attempts: s.attempts, lastError: s.lastError },
      { ok: true, attempts: 3, lastError: 'failed to destroy network (2)' },
    );
    assert.equal(calls.filter((c) => c.method === 'StopPodSandbox').length, 3);
  });

  test('StopPodSandbox gives up after its bound and reports the last error', async () => {
    handlers.StopPodSandbox = () => ({ error: { code: grpc.status.UNKNOWN, details: 'server_socket is required' } });
    const s = await kubelet().stopSandbox('id1', 4);
    assert.deepEqual(
      { ok: s.ok, attempts: s.attempts, lastError: s.lastError },
      { ok: false, attempts: 4, lastError: 'server_socket is required' },
    );
  });

  test('NotFound on StopPodSandbox counts as stopped, at the first attempt', async () => {
    handlers.StopPodSandbox = () => ({
      error: { code: grpc.status.NOT_FOUND, details: 'an error occurred when try to find sandbox: not found' },
    });
    const s = await kubelet().stopSandbox('gone');
    assert.deepEqual(
      { ok: s.ok, attempts: s.attempts, notFound: s.notFound },
      { ok: true, attempts: 1, notFound: true },
    );
  });

  test("killPod lists the pod's sandboxes by its uid label, stops each, and removes only those that stopped", async () => {
    handlers.ListPodSandbox = () => ({ reply: { items: [{ id: 'ok1' }, { id: 'stuck' }] } });
    handlers.StopPodSandbox = (req) =>
      req.podSandboxId === 'stuck' ? { error: { code: grpc.status.UNKNOWN, details: 'DEL failed' } } : { reply: {} };
    const k = kubelet();
    const pod = k.pod('p');
    const out = await k.killPod(pod, 2);
    assert.equal(
      calls.find((c) => c.method === 'ListPodSandbox')!.req.filter.labelSelector['io.kubernetes.pod.uid'],
      pod.uid,
    );
    assert.deepEqual(
      out.stops.map((s) => [s.id, s.ok, s.attempts]),
      [
        ['ok1', true, 1],
        ['stuck', false, 2],
      ],
    );
    assert.deepEqual(
      calls.filter((c) => c.method === 'RemovePodSandbox').map((c) => c.req.podSandboxId),
      ['ok1'],
    );
    assert.equal(out.removed, 1);
  });

  test('Status decodes conditions and the verbose info map', async () => {
    handlers.Status = (req) => ({
      reply: {
        status: { conditions: [{ type: 'NetworkReady', status: true }] },
        info: req.verbose ? { cniconfig: '{}' } : {},
      },
    });
    const s = await client.status(true);
    assert.deepEqual(
      s.conditions.map((c) => [c.type, c.status]),
      [['NetworkReady', true]],
    );
    assert.equal(s.info.cniconfig, '{}');
  });
});
