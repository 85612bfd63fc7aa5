// The container runtime as steward sees it: one seam, asked who is alive (the audit) and what it is
// (install's conflist version, lifecycle/cni-version.ts). RuntimeSource is what a second kind of
// runtime would implement; runtimeFor() makes the CRI one, the only kind today (podman has no CRI).

import { existsSync } from 'node:fs';
import { CriClient, DEFAULT_RUNTIME_SOCKETS } from './cri.js';

export interface RuntimeInfo {
  reachable: boolean;
  endpoint: string | null;
  /** Sandboxes listed, when reachable. */
  sandboxes?: number;
  message?: string;
  /**
   * In a report: the runtime answered the pass's first ask and stopped answering before a release
   * (what was released before stands; the rest was only reported).
   */
  lostDuringPass?: boolean;
  /** Why its answer was not trusted this pass (report only): it contradicted what the node proves. */
  distrusted?: string;
}

/** The runtime's name and version as it gives them (CRI Version: `containerd` `v2.0.1`, `cri-o` `1.32.0`). */
export interface RuntimeVersion {
  name: string;
  version: string;
  endpoint: string;
}

export interface RuntimeSource {
  /** Sandbox ids the runtime lists; null when it cannot be asked (info() says why). */
  listSandboxes(): Promise<string[] | null>;
  /** What the runtime is, or why it could not be asked within timeoutMs. */
  version(timeoutMs: number): Promise<RuntimeVersion | { error: string; endpoint: string | null }>;
  info(): RuntimeInfo;
  close(): void;
}

/** How long a ListPodSandbox may take before the runtime counts as unreachable. */
export const LIST_TIMEOUT_MS = 5000;

/**
 * The CRI runtime on `endpoint` (a socket path), or, undefined, the first of the usual sockets
 * (`defaults`) that exists.
 */
export function runtimeFor(
  endpoint: string | undefined,
  timeoutMs = LIST_TIMEOUT_MS,
  defaults: readonly string[] = DEFAULT_RUNTIME_SOCKETS,
): RuntimeSource {
  return new CriRuntime(endpoint, timeoutMs, defaults);
}

class CriRuntime implements RuntimeSource {
  private client: CriClient | undefined;

  private last: RuntimeInfo;

  constructor(
    private readonly endpoint: string | undefined,
    private readonly timeoutMs: number,
    private readonly defaults: readonly string[],
  ) {
    this.last = { reachable: false, endpoint: endpoint === undefined ? null : `unix://${endpoint}` };
  }

  info(): RuntimeInfo {
    return this.last;
  }

  /** The socket to ask now: probed at each ask when none was given (the runtime may start later). */
  private socket(): string | undefined {
    if (this.endpoint !== undefined) return this.endpoint;
    return this.defaults.find((s) => existsSync(s));
  }

  private clientFor(socket: string): CriClient {
    if (this.client?.socket !== socket) {
      this.client?.close();
      this.client = new CriClient(socket);
    }
    return this.client;
  }

  private none(): string {
    return `no runtime endpoint given and none of ${this.defaults.join(', ')} exists`;
  }

  readonly listSandboxes = async (): Promise<string[] | null> => {
    const socket = this.socket();
    if (socket === undefined) {
      this.last = { reachable: false, endpoint: null, message: this.none() };
      return null;
    }
    const endpoint = `unix://${socket}`;
    try {
      const ids = await this.clientFor(socket).listPodSandboxIds(this.timeoutMs);
      this.last = { reachable: true, endpoint, sandboxes: ids.length };
      return ids;
    } catch (e) {
      this.last = { reachable: false, endpoint, message: `ListPodSandbox failed: ${(e as Error).message}` };
      return null;
    }
  };

  async version(timeoutMs: number): Promise<RuntimeVersion | { error: string; endpoint: string | null }> {
    const socket = this.socket();
    if (socket === undefined) return { error: this.none(), endpoint: null };
    const endpoint = `unix://${socket}`;
    try {
      const v = await this.clientFor(socket).version(timeoutMs);
      return { name: v.runtimeName, version: v.runtimeVersion, endpoint };
    } catch (e) {
      return { error: `Version failed: ${(e as Error).message}`, endpoint };
    }
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}
