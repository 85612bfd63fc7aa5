// Who is alive, asked of the container runtime the way crictl asks: CRI runtime.v1 ListPodSandbox over
// the runtime's Unix socket. Every sandbox id listed is alive, whatever its state. The same service
// definition serves the project's tests as their CRI client (test/helpers/cri/client.ts).

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as GrpcJs from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';
import type { RuntimeInfo } from './run.js';

// The gRPC libraries are loaded on first use, not at start: imported, they add ~15 MiB to the RSS of
// every daemon, most of which never audits (the restart row of `npm run bench`). Both are CommonJS,
// so a synchronous require serves.
const require = createRequire(import.meta.url);
let grpcJs: typeof GrpcJs | undefined;
const grpc = (): typeof GrpcJs => (grpcJs ??= require('@grpc/grpc-js') as typeof GrpcJs);

/** runtime.proto ships beside dist/ and src/ (daemon/proto), so both resolve it the same way. */
export const RUNTIME_PROTO = fileURLToPath(new URL('../../proto/runtime.proto', import.meta.url));

/** Probed in this order when --runtime-endpoint is absent. */
export const DEFAULT_RUNTIME_SOCKETS = ['/run/containerd/containerd.sock', '/var/run/crio/crio.sock'] as const;

let definition: GrpcJs.GrpcObject | undefined;
/** The RuntimeService of runtime.proto. */
export function runtimeServiceCtor(): GrpcJs.ServiceClientConstructor {
  const protoLoader = require('@grpc/proto-loader') as typeof ProtoLoader;
  definition ??= grpc().loadPackageDefinition(
    protoLoader.loadSync(RUNTIME_PROTO, {
      keepCase: false,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  );
  const v1 = (definition.runtime as GrpcJs.GrpcObject).v1 as GrpcJs.GrpcObject;
  return v1.RuntimeService as GrpcJs.ServiceClientConstructor;
}

type Unary = (
  req: unknown,
  meta: GrpcJs.Metadata,
  opts: GrpcJs.CallOptions,
  cb: (e: GrpcJs.ServiceError | null, r: { items?: Array<{ id?: string }> }) => void,
) => void;

/** A runtime source: the sandbox ids listed (null when unreachable) and what the report says of it. */
export class CriRuntime {
  private client: GrpcJs.Client | undefined;

  private last: RuntimeInfo;

  /** endpoint: a socket path; undefined probes DEFAULT_RUNTIME_SOCKETS at each ask. */
  constructor(
    private readonly endpoint: string | undefined,
    private readonly timeoutMs = 5000,
  ) {
    this.last = { reachable: false, endpoint: endpoint === undefined ? null : `unix://${endpoint}` };
  }

  info(): RuntimeInfo {
    return this.last;
  }

  private socket(): string | undefined {
    if (this.endpoint !== undefined) return this.endpoint;
    return DEFAULT_RUNTIME_SOCKETS.find((s) => existsSync(s));
  }

  readonly listSandboxes = async (): Promise<string[] | null> => {
    const socket = this.socket();
    if (socket === undefined) {
      this.last = {
        reachable: false,
        endpoint: null,
        message: `no runtime endpoint given and none of ${DEFAULT_RUNTIME_SOCKETS.join(', ')} exists`,
      };
      return null;
    }
    const endpoint = `unix://${socket}`;
    if (this.client === undefined || this.client.getChannel().getTarget() !== `unix:${socket}`) {
      this.client?.close();
      const Ctor = runtimeServiceCtor();
      this.client = new Ctor(endpoint, grpc().credentials.createInsecure());
    }
    const client = this.client;
    const fn = (client as unknown as Record<string, Unary>).ListPodSandbox!.bind(client);
    try {
      const r = await new Promise<{ items?: Array<{ id?: string }> }>((resolve, reject) =>
        fn({ filter: {} }, new (grpc().Metadata)(), { deadline: Date.now() + this.timeoutMs }, (e, res) =>
          e ? reject(e) : resolve(res),
        ),
      );
      const ids = (r.items ?? []).map((s) => s.id ?? '').filter((id) => id !== '');
      this.last = { reachable: true, endpoint, sandboxes: ids.length };
      return ids;
    } catch (e) {
      this.last = { reachable: false, endpoint, message: `ListPodSandbox failed: ${(e as Error).message}` };
      return null;
    }
  };

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}
