// What the CRI e2e scenarios (test/e2e/cri.test.ts) share beyond the node: printing a figure,
// polling with a deadline, reading what stewardd journaled, the nat table, and running pods on the
// plain handler once the CRI plugin has reloaded its conf dir.

import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Store } from '../../../daemon/src/store/store.js';
import type { Kubelet, Pod, RunOutcome } from './kubelet.js';
import { PLAIN_HANDLER, type CriNode } from './node.js';

export function figure(what: string, values: Record<string, unknown>): void {
  process.stdout.write(`# cri figure: ${what}: ${JSON.stringify(values)}\n`);
}

export const round = (ms: number): number => Math.round(ms);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 200 ms; returns the ms it took, or fails naming `what`. */
export async function within(what: string, timeoutMs: number, cond: () => boolean | Promise<boolean>): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    if (await cond()) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(200);
  }
}

/** CNI_ARGS as stewardd journaled them (the attachments API does not return them on this branch). */
export function journaledCniArgs(node: CriNode, containerIds: string[]): Map<string, string> {
  const store = new Store(join(node.daemon.stateDir, 'steward.db'));
  try {
    return new Map(
      store
        .listAttachments({ limit: 100_000 })
        .filter((a) => containerIds.includes(a.containerId))
        .map((a) => [a.containerId, a.cniArgs]),
    );
  } finally {
    store.close();
  }
}

export function parseCniArgs(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split(';')
      .filter((kv) => kv !== '')
      .map((kv) => {
        const i = kv.indexOf('=');
        return [kv.slice(0, i), kv.slice(i + 1)];
      }),
  );
}

export function natRulesNow(): string[] {
  return execFileSync('iptables', ['-w', '-t', 'nat', '-S'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l !== '');
}

/** Waits until a pod on the plain handler starts again (its conf dir reloaded without the fixture), then removes it. */
export async function plainChainLoaded(k: Kubelet): Promise<void> {
  const pod = k.pod('plain-probe');
  for (let i = 0; i < 40; i++) {
    const r = await k.runPod(pod, { handler: PLAIN_HANDLER, attempt: i });
    await k.killPod(pod, 30);
    if (r.id) return;
    await sleep(250);
  }
  throw new Error('the plain handler did not reload its conf dir');
}

/**
 * RunPodSandbox on the plain handler once its conf dir holds the failing chain just written: the CRI
 * plugin reloads that dir on inotify, and until it has a pod still starts, so undo it and retry.
 */
export async function runOnReloadedPlainHandler(k: Kubelet, pod: Pod): Promise<RunOutcome> {
  let run = await k.runPod(pod, { handler: PLAIN_HANDLER });
  for (let i = 0; run.id && i < 20; i++) {
    await k.killPod(pod);
    await sleep(500);
    run = await k.runPod(pod, { handler: PLAIN_HANDLER, attempt: i + 1 });
  }
  return run;
}
