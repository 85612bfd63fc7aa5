// The container runtime's CRI (runtime.v1) over its Unix socket, the way crictl asks it: the service
// definition and the two calls steward makes (ListPodSandbox, Version). The same service definition
// serves the project's tests as their CRI client (test/helpers/cri/client.ts).

import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
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

type SecureConnector = ReturnType<GrpcJs.ChannelCredentials['_createSecureConnector']>;

/** Insecure credentials that can destroy, once their client is done, every socket grpc-js connected for it. */
interface SocketOwner extends GrpcJs.ChannelCredentials {
  destroySockets(): void;
}

let socketOwner: (new () => SocketOwner) | undefined;

/**
 * grpc-js (1.14) keeps the socket of a connection that never got the runtime's HTTP/2 SETTINGS (a
 * runtime that listens and never accepts, or accepts and never answers) inside its connector, which
 * nothing shuts down: client.close() reaches only connected transports, so every audit pass given
 * such a runtimeEndpoint leaked a descriptor for good. Every socket grpc-js connects is handed to its
 * credentials' connector (Http2SubchannelConnector -> SecureConnector.connect), so these credentials,
 * insecure otherwise, keep them and destroy whatever is still open when their client is done. Equal
 * only to themselves: no other client shares their subchannel (and sockets) through grpc-js's pool.
 */
function ownedInsecure(): SocketOwner {
  // The class is built on first use: grpc-js stays lazily required.
  socketOwner ??= class extends grpc().ChannelCredentials implements SocketOwner {
    private readonly insecure = grpc().credentials.createInsecure();
    private readonly sockets = new Set<Socket>();

    override _isSecure(): boolean {
      return false;
    }

    override _equals(other: GrpcJs.ChannelCredentials): boolean {
      return other === this;
    }

    override _createSecureConnector(
      ...args: Parameters<GrpcJs.ChannelCredentials['_createSecureConnector']>
    ): SecureConnector {
      const inner = this.insecure._createSecureConnector(...args);
      const sockets = this.sockets;
      return {
        connect(socket) {
          sockets.add(socket);
          socket.once('close', () => sockets.delete(socket));
          return inner.connect(socket);
        },
        waitForReady: () => inner.waitForReady(),
        getCallCredentials: () => inner.getCallCredentials(),
        destroy: () => inner.destroy(),
      };
    }

    destroySockets(): void {
      for (const s of this.sockets) s.destroy();
      this.sockets.clear();
    }
  };
  return new socketOwner();
}

/**
 * The two CRI calls steward makes, over one runtime socket, each with its own deadline: who is alive
 * (ListPodSandbox: the ids, whatever their state) and what the runtime is (Version). Both reject on
 * any failure; audit/runtime.ts turns that into what the audit and install report.
 */
export class CriClient {
  private readonly client: GrpcJs.Client;
  private readonly credentials = ownedInsecure();
  /** Calls not yet settled: a closed client's sockets are destroyed once they are (each has a deadline). */
  private inFlight = 0;
  private closed = false;

  constructor(readonly socket: string) {
    const Ctor = runtimeServiceCtor();
    this.client = new Ctor(`unix://${socket}`, this.credentials);
  }

  private call<T>(method: string, req: unknown, timeoutMs: number): Promise<T> {
    const fn = (this.client as unknown as Record<string, Unary<T>>)[method]!.bind(this.client);
    this.inFlight++;
    const settled = () => {
      this.inFlight--;
      this.releaseSockets();
    };
    return new Promise<T>((resolve, reject) => {
      try {
        fn(req, new (grpc().Metadata)(), { deadline: Date.now() + timeoutMs }, (e, res) => {
          settled();
          if (e) reject(e);
          else resolve(res);
        });
      } catch (e) {
        settled(); // refused before it started (a closed channel): no callback comes
        reject(e as Error);
      }
    });
  }

  private releaseSockets(): void {
    if (this.closed && this.inFlight === 0) this.credentials.destroySockets();
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

  /** No new calls; the sockets go once the calls still running have settled. */
  close(): void {
    this.closed = true;
    this.client.close();
    this.releaseSockets();
  }
}
