// A fake CRI runtime on a Unix socket: runtime.v1 ListPodSandbox answers the given sandbox ids (the
// daemon's own service definition, daemon/src/audit/cri.ts). For the audit's integration tests.

import * as grpc from '@grpc/grpc-js';
import { runtimeServiceCtor } from '../../daemon/src/audit/cri.js';
import type { TestEnv } from './env.js';

/** Serves `ids` as the runtime's sandboxes on `socket`; stopped by the returned stop() or env.close(). */
export async function fakeRuntime(env: TestEnv, socket: string, ids: string[]): Promise<() => Promise<void>> {
  const server = new grpc.Server();
  server.addService(runtimeServiceCtor().service, {
    ListPodSandbox: (_call: unknown, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, { items: ids.map((i) => ({ id: i, state: 'SANDBOX_READY' })) }),
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  // forceShutdown: a runtime that died, its connections cut, not one that drains.
  const stop = async () => server.forceShutdown();
  env.defer(stop);
  return stop;
}
