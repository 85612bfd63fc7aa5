// The container runtime's CRI (runtime.v1) over its Unix socket, the way crictl asks it: the service
// definition and the two calls steward makes (ListPodSandbox, Version). The same service definition
// serves the project's tests as their CRI client (test/helpers/cri/client.ts).

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as GrpcJs from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';

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

type Unary<T> = (
  req: unknown,
  meta: GrpcJs.Metadata,
  opts: GrpcJs.CallOptions,
  cb: (e: GrpcJs.ServiceError | null, r: T) => void,
) => void;

/** What CRI's Version answers: the runtime's name and version (`containerd`, `v1.7.24`; `cri-o`, `1.32.0`). */
export interface CriVersion {
  runtimeName: string;
  runtimeVersion: string;
  runtimeApiVersion: string;
}

/**
 * The two CRI calls steward makes, over one runtime socket, each with its own deadline: who is alive
 * (ListPodSandbox: the ids, whatever their state) and what the runtime is (Version). Both reject on
 * any failure; audit/runtime.ts turns that into what the audit and install report.
 */
export class CriClient {
  private readonly client: GrpcJs.Client;

  constructor(readonly socket: string) {
    const Ctor = runtimeServiceCtor();
    this.client = new Ctor(`unix://${socket}`, grpc().credentials.createInsecure());
  }

  private call<T>(method: string, req: unknown, timeoutMs: number): Promise<T> {
    const fn = (this.client as unknown as Record<string, Unary<T>>)[method]!.bind(this.client);
    return new Promise<T>((resolve, reject) =>
      fn(req, new (grpc().Metadata)(), { deadline: Date.now() + timeoutMs }, (e, res) =>
        e ? reject(e) : resolve(res),
      ),
    );
  }

  async listPodSandboxIds(timeoutMs: number): Promise<string[]> {
    const r = await this.call<{ items?: Array<{ id?: string }> }>('ListPodSandbox', { filter: {} }, timeoutMs);
    return (r.items ?? []).map((s) => s.id ?? '').filter((id) => id !== '');
  }

  async version(timeoutMs: number): Promise<CriVersion> {
    const r = await this.call<Partial<CriVersion>>('Version', { version: 'v1' }, timeoutMs);
    return {
      runtimeName: r.runtimeName ?? '',
      runtimeVersion: r.runtimeVersion ?? '',
      runtimeApiVersion: r.runtimeApiVersion ?? '',
    };
  }

  close(): void {
    this.client.close();
  }
}
