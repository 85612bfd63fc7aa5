// Who the audit asks is alive: the CRI runtime on its socket (audit/runtime.ts over audit/cri.ts), here a
// real gRPC server on a Unix socket in a temp dir serving runtime.proto's RuntimeService, root-free.
// What the report's `runtime` says (reachable, endpoint, sandboxes, or why not), the ids listed, and
// the runtime's name and version as install reads them.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { CriClient, DEFAULT_RUNTIME_SOCKETS, runtimeServiceCtor } from '../../daemon/src/audit/cri.js';
import { runtimeFor } from '../../daemon/src/audit/runtime.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-audit-runtime-'));
const socket = join(dir, 'cri.sock');
let server: grpc.Server;

type Reply = { error?: string; reply?: unknown; never?: boolean; afterMs?: number };
const handlers: Record<string, (req: unknown) => Reply> = {};
const requests: Array<{ method: string; req: unknown }> = [];

function serve(method: string) {
  return (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
    requests.push({ method, req: call.request });
    const out: Reply = (handlers[method] ?? (() => ({ reply: {} })))(call.request);
    if (out.never) return;
    if (out.error !== undefined) cb({ code: grpc.status.UNAVAILABLE, details: out.error } as grpc.ServiceError, null);
    else if (out.afterMs !== undefined) setTimeout(() => cb(null, out.reply ?? {}), out.afterMs);
    else cb(null, out.reply ?? {});
  };
}

before(async () => {
  server = new grpc.Server();
  server.addService(runtimeServiceCtor().service, {
    ListPodSandbox: serve('ListPodSandbox'),
    Version: serve('Version'),
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
});

after(async () => {
  server.forceShutdown();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  requests.length = 0;
  for (const k of Object.keys(handlers)) delete handlers[k];
});

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);

describe('the CRI runtime as the audit asks it', () => {
  it('before any ask: not reachable yet, its endpoint named as crictl writes it', () => {
    const rt = runtimeFor(socket);
    assert.deepEqual(rt.info(), { reachable: false, endpoint: `unix://${socket}` });
    rt.close();
  });

  it('lists every sandbox id, whatever its state, and says how many', async () => {
    handlers.ListPodSandbox = () => ({
      reply: { items: [{ id: A, state: 'SANDBOX_NOTREADY' }, { id: B }, { id: '' }, {}] },
    });
    const rt = runtimeFor(socket);
    assert.deepEqual(await rt.listSandboxes(), [A, B], 'ids without a value are dropped');
    assert.deepEqual(rt.info(), { reachable: true, endpoint: `unix://${socket}`, sandboxes: 2 });
    assert.deepEqual(
      requests.map((r) => r.method),
      ['ListPodSandbox'],
    );
    // Asked again on the same socket: answered again (one client, reused).
    handlers.ListPodSandbox = () => ({ reply: {} });
    assert.deepEqual(await rt.listSandboxes(), [], 'no items: none listed');
    assert.deepEqual(rt.info(), { reachable: true, endpoint: `unix://${socket}`, sandboxes: 0 });
    rt.close();
  });

  it('a runtime that refuses the call is unreachable, and says why; it is asked again next time', async () => {
    handlers.ListPodSandbox = () => ({ error: 'restarting' });
    const rt = runtimeFor(socket);
    assert.equal(await rt.listSandboxes(), null);
    const info = rt.info();
    assert.equal(info.reachable, false);
    assert.equal(info.endpoint, `unix://${socket}`);
    assert.match(info.message ?? '', /^ListPodSandbox failed: .*restarting/);
    handlers.ListPodSandbox = () => ({ reply: { items: [{ id: A }] } });
    assert.deepEqual(await rt.listSandboxes(), [A]);
    assert.deepEqual(rt.info(), { reachable: true, endpoint: `unix://${socket}`, sandboxes: 1 });
    rt.close();
  });

  it('a runtime that accepts and never answers is unreachable once its deadline passes', async () => {
    handlers.ListPodSandbox = () => ({ never: true });
    const rt = runtimeFor(socket, 300);
    assert.equal(await rt.listSandboxes(), null);
    assert.match(rt.info().message ?? '', /^ListPodSandbox failed: .*(Deadline|DEADLINE)/);
    rt.close();
  });

  it('a socket nobody listens on is unreachable', async () => {
    const rt = runtimeFor(join(dir, 'nobody.sock'), 2000);
    assert.equal(await rt.listSandboxes(), null);
    assert.equal(rt.info().reachable, false);
    assert.equal(rt.info().endpoint, `unix://${join(dir, 'nobody.sock')}`);
    assert.match(rt.info().message ?? '', /^ListPodSandbox failed: /);
    rt.close();
  });

  it("gives the runtime's name and version as CRI's Version says them, asking for v1", async () => {
    handlers.Version = () => ({
      reply: { version: '0.1.0', runtimeName: 'containerd', runtimeVersion: 'v1.7.24', runtimeApiVersion: 'v1' },
    });
    const rt = runtimeFor(socket);
    assert.deepEqual(await rt.version(2000), { name: 'containerd', version: 'v1.7.24', endpoint: `unix://${socket}` });
    assert.deepEqual(requests, [{ method: 'Version', req: { version: 'v1' } }]);
    handlers.Version = () => ({ error: 'no' });
    const failed = await rt.version(2000);
    assert.ok('error' in failed);
    assert.match(failed.error, /^Version failed: .*no/);
    assert.equal(failed.endpoint, `unix://${socket}`);
    rt.close();
  });

  it("the CRI client gives Version's three fields, the API version included", async () => {
    handlers.Version = () => ({
      reply: { version: '0.1.0', runtimeName: 'cri-o', runtimeVersion: '1.32.0', runtimeApiVersion: 'v1' },
    });
    const client = new CriClient(socket);
    assert.deepEqual(await client.version(2000), {
      runtimeName: 'cri-o',
      runtimeVersion: '1.32.0',
      runtimeApiVersion: 'v1',
    });
    handlers.Version = () => ({ reply: {} });
    assert.deepEqual(await client.version(2000), { runtimeName: '', runtimeVersion: '', runtimeApiVersion: '' });
    client.close();
  });

  it('a Version answer without its fields gives empty ones', async () => {
    handlers.Version = () => ({ reply: {} });
    const rt = runtimeFor(socket);
    assert.deepEqual(await rt.version(2000), { name: '', version: '', endpoint: `unix://${socket}` });
    rt.close();
  });

  it('no endpoint given and none of the usual sockets there: unreachable, naming the sockets looked for', async () => {
    // The usual sockets, moved to where none exists: the test runs whatever runtime this machine has.
    const gone = DEFAULT_RUNTIME_SOCKETS.map((s) => join(dir, 'absent', s));
    const rt = runtimeFor(undefined, undefined, gone);
    assert.deepEqual(rt.info(), { reachable: false, endpoint: null });
    assert.equal(await rt.listSandboxes(), null);
    assert.deepEqual(rt.info(), {
      reachable: false,
      endpoint: null,
      message: `no runtime endpoint given and none of ${gone.join(', ')} exists`,
    });
    assert.deepEqual(await rt.version(1000), {
      error: `no runtime endpoint given and none of ${gone.join(', ')} exists`,
      endpoint: null,
    });
    rt.close();
  });

  it('no endpoint given: the first of the usual sockets that exists is asked', async () => {
    const rt = runtimeFor(undefined, undefined, [join(dir, 'absent.sock'), socket]);
    assert.deepEqual(await rt.version(2000), { name: '', version: '', endpoint: `unix://${socket}` });
    rt.close();
  });

  // The timeout only bounds a failure (a channel close() leaves open is waited for, not timed).
  it(
    'one connection to the runtime, reused for every ask on the same socket and closed by close()',
    { timeout: 10_000 },
    async () => {
      // A counting proxy in front of the runtime's socket: each connection the client opens is one here.
      const conns: Socket[] = [];
      const proxySocket = join(dir, 'proxy.sock');
      const proxy = createServer((c) => {
        conns.push(c);
        const up = createConnection(socket);
        c.pipe(up).pipe(c);
        c.on('close', () => up.destroy());
        up.on('close', () => c.destroy());
      });
      await new Promise<void>((r) => proxy.listen(proxySocket, r));
      try {
        handlers.ListPodSandbox = () => ({ reply: { items: [{ id: A }] } });
        const rt = runtimeFor(proxySocket);
        assert.deepEqual(await rt.listSandboxes(), [A]);
        assert.deepEqual(await rt.listSandboxes(), [A]);
        assert.deepEqual(await rt.version(2000), { name: '', version: '', endpoint: `unix://${proxySocket}` });
        assert.equal(conns.length, 1, 'three asks, one connection');
        const closed = new Promise((r) => conns[0]!.once('close', r));
        rt.close();
        await closed; // never, were its channel left open
        assert.equal(conns.length, 1);
      } finally {
        for (const c of conns) c.destroy();
        await new Promise((r) => proxy.close(r));
      }
    },
  );

  // A runtime hung before HTTP/2's SETTINGS: grpc-js kept each such connection's socket for good
  // (client.close() reaches only connected transports), one descriptor per audit pass given a
  // runtimeEndpoint. Counted from the runtime's side: every connection it accepted must close.
  async function hungRuntime() {
    const conns = new Set<Socket>();
    const path = join(dir, `hung-${conns.size}-${Math.random().toString(36).slice(2)}.sock`);
    const hung = createServer((c) => {
      conns.add(c);
      c.resume(); // reads and drops what the client writes (so it sees the client close), answers nothing
      c.on('close', () => conns.delete(c));
    });
    await new Promise<void>((r) => hung.listen(path, r));
    const stop = async () => {
      for (const c of conns) c.destroy();
      await new Promise((r) => hung.close(r));
    };
    return { path, conns, stop };
  }

  const until = async (what: () => boolean, ms: number) => {
    for (const end = Date.now() + ms; !what() && Date.now() < end;) await new Promise((r) => setTimeout(r, 10));
    return what();
  };

  it('a runtime that accepts and never answers: each pass given its endpoint closes its connection', async () => {
    const hung = await hungRuntime();
    try {
      for (let pass = 0; pass < 3; pass++) {
        const rt = runtimeFor(hung.path, 150); // as Auditor.run asks for a runtimeEndpoint= pass
        assert.equal(await rt.listSandboxes(), null);
        assert.match(rt.info().message ?? '', /ListPodSandbox failed: .*[Dd]eadline/);
        rt.close();
      }
      assert.ok(await until(() => hung.conns.size === 0, 2000), `${hung.conns.size} connections left open`);
    } finally {
      await hung.stop();
    }
  });

  it('closed while a call is being answered: the call still gets its answer, then the connection closes', async () => {
    handlers.ListPodSandbox = () => ({ reply: { items: [{ id: A }] }, afterMs: 300 });
    const conns: Socket[] = [];
    const proxySocket = join(dir, 'proxy-slow.sock');
    const proxy = createServer((c) => {
      conns.push(c);
      const up = createConnection(socket);
      c.pipe(up).pipe(c);
      c.on('close', () => up.destroy());
      up.on('close', () => c.destroy());
    });
    await new Promise<void>((r) => proxy.listen(proxySocket, r));
    try {
      const client = new CriClient(proxySocket);
      const call = client.listPodSandboxIds(5000);
      assert.ok(await until(() => requests.length === 1, 2000), 'the call never reached the runtime');
      const closed = new Promise((r) => conns[0]!.once('close', r));
      client.close();
      assert.deepEqual(await call, [A]);
      await closed;
      assert.equal(conns.length, 1);
    } finally {
      for (const c of conns) c.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });
});
