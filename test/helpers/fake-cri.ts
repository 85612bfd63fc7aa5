// A fake CRI runtime on a Unix socket: runtime.v1 ListPodSandbox answers the given sandbox ids, and
// Version the given runtime name and version (the daemon's own service definition,
// daemon/src/audit/cri.ts). For the audit's and the conflist version's integration tests.

import * as grpc from '@grpc/grpc-js';
import { runtimeServiceCtor } from '../../daemon/src/audit/cri.js';
import type { TestEnv } from './env.js';

export interface FakeRuntime {
  /** ListPodSandbox calls received so far. */
  calls(): number;
  /** A runtime that died: the server stops at once, its connections cut. */
  stop(): Promise<void>;
}

/**
 * Serves `ids` (or what `ids()` gives at each call) as the runtime's sandboxes on `socket`; stopped by
 * stop() or env.close(). With `answer: N`, only the first N ListPodSandbox calls are answered and the
 * later ones never are (a runtime that hangs mid-pass: the daemon's deadline ends each); with
 * `failAfter: N`, the later ones get a gRPC error at once; with `delayMs`, each answer comes that late.
 */
export async function fakeRuntime(
  env: TestEnv,
  socket: string,
  ids: string[] | (() => string[]),
  opts: {
    answer?: number;
    failAfter?: number;
    delayMs?: number;
    /** Version's answer comes this late (a runtime slow to say what it is). */
    versionDelayMs?: number;
    /** What Version answers (default: an unknown runtime); 'hang' never answers it. */
    version?: { runtimeName: string; runtimeVersion: string } | 'hang';
  } = {},
): Promise<FakeRuntime> {
  let calls = 0;
  const server = new grpc.Server();
  server.addService(runtimeServiceCtor().service, {
    ListPodSandbox: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
      calls += 1;
      if (opts.answer !== undefined && calls > opts.answer) return;
      if (opts.failAfter !== undefined && calls > opts.failAfter) {
        cb({ code: grpc.status.UNAVAILABLE, details: 'runtime restarting' } as grpc.ServiceError, null);
        return;
      }
      const items = (typeof ids === 'function' ? ids() : ids).map((i) => ({ id: i, state: 'SANDBOX_READY' }));
      setTimeout(() => cb(null, { items }), opts.delayMs ?? 0);
    },
    Version: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
      const v = opts.version ?? { runtimeName: 'fake-runtime', runtimeVersion: '0.0.1' };
      if (v === 'hang') return;
      setTimeout(() => cb(null, { version: '0.1.0', runtimeApiVersion: 'v1', ...v }), opts.versionDelayMs ?? 0);
    },
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  const stop = async () => server.forceShutdown();
  env.defer(stop);
  return { calls: () => calls, stop };
}
