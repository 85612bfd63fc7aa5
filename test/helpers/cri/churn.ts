// Pod churn as a busy node sees it: a fixed number of pods kept alive (the kubelet's default
// max-pods is 110) while each is replaced in turn: its sandbox stopped and removed, a new pod run in
// its place. Every other slot's pods carry a hostPort, so portmap adds and removes per-pod chains
// as well as passing through. Shared by the correctness test (test/e2e/cri-churn.test.ts) and the
// soak row (bench/rows/cri-churn.ts).

import type { PortMapping } from './client.js';
import type { Kubelet, Pod } from './kubelet.js';

/** Host ports of the slots that map one (DNAT rules only: nothing listens, nothing is sent). */
const HOST_PORT_BASE = 42_000;

interface Slot {
  pod: Pod;
  id?: string;
}

export interface Replacement {
  /** performance.now() when the new pod's RunPodSandbox was answered. */
  at: number;
  /** StopPodSandbox + RemovePodSandbox of the old sandbox. */
  downMs: number;
  /** RunPodSandbox of the new pod (the ADD through the network chain is most of it). */
  runMs: number;
  ok: boolean;
}

export class Churn {
  private readonly slots: Slot[] = [];
  /** Every sandbox id this churn ever had (to count what any of them left). */
  readonly everyId: string[] = [];
  readonly failures: string[] = [];
  private next = 0;
  private serial = 0;

  constructor(
    private readonly k: Kubelet,
    readonly size: number,
    private readonly handler = '',
  ) {}

  private ports(slot: number): PortMapping[] {
    return slot % 2 === 0 ? [{ protocol: 'TCP', containerPort: 8080, hostPort: HOST_PORT_BASE + slot }] : [];
  }

  private async run(slot: number): Promise<{ ok: boolean; ms: number }> {
    const pod = this.k.pod(`churn-${slot}-${this.serial++}`);
    const r = await this.k.runPod(pod, { handler: this.handler, portMappings: this.ports(slot) });
    this.slots[slot] = { pod, id: r.id };
    if (r.id) {
      this.everyId.push(r.id);
      return { ok: true, ms: r.ms };
    }
    this.failures.push(`run ${pod.name}: ${r.error?.message}`);
    // As the sync loop does after a failed RunPodSandbox: whatever sandbox it left is killed.
    const kill = await this.k.killPod(pod);
    for (const s of kill.stops) if (!this.everyId.includes(s.id)) this.everyId.push(s.id);
    this.slots[slot] = { pod };
    return { ok: false, ms: r.ms };
  }

  private async down(slot: number): Promise<void> {
    const s = this.slots[slot];
    if (!s?.id) return;
    const stop = await this.k.stopSandbox(s.id);
    if (!stop.ok) {
      this.failures.push(`stop ${s.pod.name}: ${stop.lastError}`);
      return;
    }
    try {
      await this.k.cri.removePodSandbox(s.id);
    } catch (e) {
      this.failures.push(`remove ${s.pod.name}: ${(e as Error).message}`);
    }
    this.slots[slot] = { pod: s.pod };
  }

  /** Runs every slot's first pod, `parallel` at a time. */
  async fill(parallel = 10): Promise<void> {
    for (let i = 0; i < this.size; i += parallel) {
      const batch = Array.from({ length: Math.min(parallel, this.size - i) }, (_, j) => i + j);
      await Promise.all(batch.map((slot) => this.run(slot)));
    }
  }

  /** Replaces the next slot's pod (round robin): stop + remove the old sandbox, run a new pod. */
  async replaceNext(): Promise<Replacement> {
    const slot = this.next;
    this.next = (this.next + 1) % this.size;
    const t0 = performance.now();
    await this.down(slot);
    const downMs = performance.now() - t0;
    const r = await this.run(slot);
    return { at: performance.now(), downMs, runMs: r.ms, ok: r.ok };
  }

  /** Pods running now. */
  get alive(): number {
    return this.slots.filter((s) => s.id !== undefined).length;
  }

  /** Stops and removes every pod, `parallel` at a time. */
  async drain(parallel = 10): Promise<void> {
    for (let i = 0; i < this.size; i += parallel) {
      const batch = Array.from({ length: Math.min(parallel, this.size - i) }, (_, j) => i + j);
      await Promise.all(batch.map((slot) => this.down(slot)));
    }
  }
}
