// A small gRPC client of the CRI runtime.v1 RuntimeService (daemon/proto/runtime.proto, shared with the daemon's audit), spoken over
// containerd's Unix socket the way the kubelet speaks it: the pod-sandbox calls, Version and Status.
// Messages use proto-loader's camelCase field names; enums come back as their names, int64 as strings.

import * as grpc from '@grpc/grpc-js';

import { runtimeServiceCtor } from '../../../daemon/src/audit/cri.js';

export { runtimeServiceCtor };

export interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt?: number;
}
export interface PortMapping {
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  containerPort: number;
  hostPort: number;
  hostIp?: string;
}
export interface PodSandboxConfig {
  metadata: PodSandboxMetadata;
  hostname?: string;
  logDirectory?: string;
  dnsConfig?: { servers?: string[]; searches?: string[]; options?: string[] };
  portMappings?: PortMapping[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  linux?: {
    cgroupParent?: string;
    securityContext?: { namespaceOptions?: { network?: string; pid?: string; ipc?: string } };
  };
}
export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata;
  state: 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
  createdAt: string;
  labels: Record<string, string>;
}
export interface PodSandboxStatus extends PodSandbox {
  network: { ip: string; additionalIps: Array<{ ip: string }> } | null;
}
export interface RuntimeCondition {
  type: string;
  status: boolean;
  reason: string;
  message: string;
}

/** A CRI call that failed: the gRPC status code and containerd's message. */
export class CriError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    readonly details: string,
  ) {
    super(`CRI ${method} failed (${grpc.status[code] ?? code}): ${details}`);
  }
}

type Unary = (
  req: unknown,
  meta: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (e: grpc.ServiceError | null, r: any) => void,
) => void;

export class CriClient {
  private readonly client: grpc.Client;
  /** Calls made per method, for the figures a scenario prints. */
  readonly calls: Record<string, number> = {};

  constructor(
    readonly socket: string,
    private readonly timeoutMs = 120_000,
  ) {
    const Ctor = runtimeServiceCtor();
    this.client = new Ctor(`unix://${socket}`, grpc.credentials.createInsecure());
  }

  close(): void {
    this.client.close();
  }

  /** `metadata`: gRPC metadata sent with the call (the kubelet's `traceparent` when its tracing is on). */
  private call<T>(
    method: string,
    req: unknown,
    timeoutMs = this.timeoutMs,
    metadata: Record<string, string> = {},
  ): Promise<T> {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
    const fn = (this.client as unknown as Record<string, Unary>)[method]!.bind(this.client);
    const meta = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) meta.set(k, v);
    return new Promise((resolve, reject) => {
      fn(req, meta, { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) reject(new CriError(method, err.code, err.details || err.message));
        else resolve(res as T);
      });
    });
  }

  version(): Promise<{ version: string; runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }> {
    return this.call('Version', { version: 'v1' });
  }

  /** Runtime conditions; with verbose, `info.config` and `info.cniconfig` hold containerd's JSON. */
  async status(verbose = false): Promise<{ conditions: RuntimeCondition[]; info: Record<string, string> }> {
    const r = await this.call<{ status: { conditions: RuntimeCondition[] }; info: Record<string, string> }>('Status', {
      verbose,
    });
    return { conditions: r.status?.conditions ?? [], info: r.info ?? {} };
  }

  /** `metadata`: e.g. `{ traceparent }`, as the kubelet's otelgrpc client interceptor sends its span's context. */
  async runPodSandbox(
    config: PodSandboxConfig,
    runtimeHandler = '',
    metadata: Record<string, string> = {},
  ): Promise<string> {
    const r = await this.call<{ podSandboxId: string }>(
      'RunPodSandbox',
      { config, runtimeHandler },
      this.timeoutMs,
      metadata,
    );
    return r.podSandboxId;
  }

  async stopPodSandbox(id: string): Promise<void> {
    await this.call('StopPodSandbox', { podSandboxId: id });
  }

  async removePodSandbox(id: string): Promise<void> {
    await this.call('RemovePodSandbox', { podSandboxId: id });
  }

  async podSandboxStatus(id: string): Promise<PodSandboxStatus> {
    const r = await this.call<{ status: PodSandboxStatus }>('PodSandboxStatus', { podSandboxId: id, verbose: false });
    return r.status;
  }

  async listPodSandbox(labelSelector: Record<string, string> = {}): Promise<PodSandbox[]> {
    const r = await this.call<{ items: PodSandbox[] }>('ListPodSandbox', { filter: { labelSelector } });
    return r.items ?? [];
  }
}
