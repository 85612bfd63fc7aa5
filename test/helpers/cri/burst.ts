// A burst of pods as the kubelet sends one when many pods land on a node at once (a Deployment
// scaled up, a node drained onto this one): every RunPodSandbox at the same moment, each pod's
// address read back, then every StopPodSandbox + RemovePodSandbox at the same moment. Shared by the
// correctness test (test/e2e/cri-burst.test.ts) and the timed row (bench/rows/cri-burst.ts).

import type { CriClient } from './client.js';
import type { Kubelet, Pod, RunOutcome } from './kubelet.js';

export interface BurstUp {
  runs: RunOutcome[];
  /** From the first RunPodSandbox sent to the last one answered: when the last pod is ready. */
  lastReadyMs: number;
  failures: string[];
}

/** RunPodSandbox for every pod at once on `handler` ('' = containerd's default: steward). */
export async function runAtOnce(k: Kubelet, pods: Pod[], handler = ''): Promise<BurstUp> {
  const t0 = performance.now();
  const runs = await Promise.all(pods.map((p) => k.runPod(p, { handler })));
  const lastReadyMs = performance.now() - t0;
  const failures = runs.filter((r) => !r.id).map((r) => `${r.pod.name}: ${r.error?.message ?? 'no id'}`);
  return { runs, lastReadyMs, failures };
}

/** Each sandbox's state and address (PodSandboxStatus), in the order given. */
export async function sandboxAddresses(cri: CriClient, ids: string[]): Promise<Array<{ state: string; ip: string }>> {
  return Promise.all(
    ids.map(async (id) => {
      const st = await cri.podSandboxStatus(id);
      return { state: st.state, ip: st.network?.ip ?? '' };
    }),
  );
}

export interface BurstDown {
  /** Per sandbox: StopPodSandbox (with the kubelet's retries) + RemovePodSandbox. */
  ms: number[];
  wallMs: number;
  /** StopPodSandbox calls beyond the first, summed over the sandboxes. */
  stopRetries: number;
  failures: string[];
}

/** StopPodSandbox + RemovePodSandbox of every sandbox at once, as the kubelet's pod workers do. */
export async function stopRemoveAtOnce(k: Kubelet, ids: string[]): Promise<BurstDown> {
  const failures: string[] = [];
  let stopRetries = 0;
  const t0 = performance.now();
  const ms = await Promise.all(
    ids.map(async (id) => {
      const s0 = performance.now();
      const stop = await k.stopSandbox(id);
      stopRetries += stop.attempts - 1;
      if (!stop.ok) {
        failures.push(`stop ${id.slice(0, 12)}: ${stop.lastError}`);
        return performance.now() - s0;
      }
      try {
        await k.cri.removePodSandbox(id);
      } catch (e) {
        failures.push(`remove ${id.slice(0, 12)}: ${(e as Error).message}`);
      }
      return performance.now() - s0;
    }),
  );
  return { ms, wallMs: performance.now() - t0, stopRetries, failures };
}
