// A kubelet-like driver of the CRI pod-sandbox calls: builds the sandbox config the kubelet sends
// (metadata, io.kubernetes.pod.* labels, hostname, cgroup parent, port mappings), and tears pods
// down the way its sync loop does: after a failed RunPodSandbox it lists the pod's sandboxes and
// kills them, retrying StopPodSandbox at an interval for as long as it fails (up to a bound here),
// and removes a sandbox only once it stopped (NotFound on stop counts as stopped, as in the kubelet). Counts every attempt, for the figures scenarios print.

import { randomUUID } from 'node:crypto';
import { status as grpcStatus } from '@grpc/grpc-js';
import { CriError, type CriClient, type PodSandboxConfig, type PortMapping } from './client.js';

export interface Pod {
  name: string;
  namespace: string;
  uid: string;
}

export interface RunOutcome {
  pod: Pod;
  attempt: number;
  id?: string;
  error?: CriError;
  ms: number;
}

export interface StopOutcome {
  id: string;
  ok: boolean;
  attempts: number;
  ms: number;
  lastError?: string;
  /** The runtime answered NotFound: it had already removed the sandbox (the kubelet takes that as stopped). */
  notFound?: boolean;
}

export interface KillOutcome {
  sandboxes: number;
  stops: StopOutcome[];
  removed: number;
}

export class Kubelet {
  /** StopPodSandbox retries: every `stopIntervalMs`, at most `stopMaxAttempts` per sandbox. */
  stopIntervalMs = 1000;
  stopMaxAttempts = 10;

  constructor(
    readonly cri: CriClient,
    private readonly opts: { cgroupParent: string; logRoot: string; tag: string },
  ) {}

  pod(name: string, namespace = 'default'): Pod {
    return { name, namespace, uid: randomUUID() };
  }

  config(pod: Pod, attempt = 0, portMappings: PortMapping[] = []): PodSandboxConfig {
    return {
      metadata: { name: pod.name, uid: pod.uid, namespace: pod.namespace, attempt },
      hostname: pod.name.slice(0, 63),
      logDirectory: `${this.opts.logRoot}/${pod.namespace}_${pod.name}_${pod.uid}`,
      dnsConfig: { servers: [], searches: [], options: [] },
      portMappings,
      labels: {
        'io.kubernetes.pod.name': pod.name,
        'io.kubernetes.pod.namespace': pod.namespace,
        'io.kubernetes.pod.uid': pod.uid,
        'stw-e2e': this.opts.tag,
      },
      annotations: { 'kubernetes.io/config.source': 'api' },
      linux: {
        cgroupParent: this.opts.cgroupParent,
        securityContext: { namespaceOptions: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } },
      },
    };
  }

  /**
   * RunPodSandbox; `handler` is the runtime handler (RuntimeClass), '' for containerd's default;
   * `traceparent` (W3C, `00-<trace id>-<span id>-<flags>`) is sent as the call's gRPC metadata, as the
   * kubelet's traced CRI client does (otelgrpc's interceptor with the W3C propagator).
   */
  async runPod(
    pod: Pod,
    opts: { attempt?: number; portMappings?: PortMapping[]; handler?: string; traceparent?: string } = {},
  ): Promise<RunOutcome> {
    const attempt = opts.attempt ?? 0;
    const t0 = performance.now();
    try {
      const id = await this.cri.runPodSandbox(
        this.config(pod, attempt, opts.portMappings),
        opts.handler ?? '',
        opts.traceparent === undefined ? {} : { traceparent: opts.traceparent },
      );
      return { pod, attempt, id, ms: performance.now() - t0 };
    } catch (e) {
      if (!(e instanceof CriError)) throw e;
      return { pod, attempt, error: e, ms: performance.now() - t0 };
    }
  }

  /** StopPodSandbox until it succeeds, every stopIntervalMs, at most stopMaxAttempts times. */
  async stopSandbox(id: string, maxAttempts = this.stopMaxAttempts): Promise<StopOutcome> {
    const t0 = performance.now();
    let lastError: string | undefined;
    for (let attempts = 1; attempts <= maxAttempts; attempts++) {
      try {
        await this.cri.stopPodSandbox(id);
        return { id, ok: true, attempts, ms: performance.now() - t0, lastError };
      } catch (e) {
        if (!(e instanceof CriError)) throw e;
        // As the kubelet does: a sandbox the runtime no longer knows is stopped.
        if (e.code === grpcStatus.NOT_FOUND)
          return { id, ok: true, notFound: true, attempts, ms: performance.now() - t0, lastError };
        lastError = e.details;
      }
      if (attempts < maxAttempts) await new Promise((r) => setTimeout(r, this.stopIntervalMs));
    }
    return { id, ok: false, attempts: maxAttempts, ms: performance.now() - t0, lastError };
  }

  /** The pod's sandboxes as ListPodSandbox reports them (by the pod-uid label). */
  sandboxesOf(pod: Pod) {
    return this.cri.listPodSandbox({ 'io.kubernetes.pod.uid': pod.uid });
  }

  /** What the sync loop does for a pod being deleted (or after a failed RunPodSandbox): stop each sandbox, remove the stopped ones. */
  async killPod(pod: Pod, maxAttempts = this.stopMaxAttempts): Promise<KillOutcome> {
    const sandboxes = await this.sandboxesOf(pod);
    const stops: StopOutcome[] = [];
    let removed = 0;
    for (const s of sandboxes) {
      const stop = await this.stopSandbox(s.id, maxAttempts);
      stops.push(stop);
      if (!stop.ok) continue;
      await this.cri.removePodSandbox(s.id);
      removed++;
    }
    return { sandboxes: sandboxes.length, stops, removed };
  }
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
