// What the per-pod timing of test/e2e/cri.test.ts and bench/rows/cri-pod.ts reads besides wall time:
// stewardd's own histograms (GET /metrics: steward_cni_request_duration_seconds,
// steward_plugin_duration_seconds, steward_journal_commit_seconds, steward_queue_wait_seconds),
// differenced over the timed pods, so the per-pod cost splits into the daemon's own path (of it: the
// journal's commits, synced and not, and the queue wait), each delegate's execution and what lies
// outside the daemon (the shim exec, its connect, containerd's side); and one `curl --unix-socket`
// exec, the floor of any executed client.

import { execFile } from 'node:child_process';

/** `<metric>{labels}` -> value, for every histogram _sum and _count line of a /metrics text. */
export type Sums = Map<string, number>;

export function histogramSums(text: string): Sums {
  const out: Sums = new Map();
  for (const line of text.split('\n')) {
    const m =
      /^(steward_(?:(?:cni_request|plugin)_duration|journal_commit|queue_wait)_seconds_(?:sum|count))(\{[^}]*\})? (\S+)$/.exec(
        line,
      );
    if (m) out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

/**
 * Per pod, from two /metrics readings `pods` pods apart: ms and calls of each CNI command the daemon
 * answered, ms of each delegate plugin execution by plugin and command, and the daemon's own ms
 * (requests minus delegates: socket, queue, journal writes and syncs, conversion, response).
 */
export function perPod(before: Sums, after: Sums, pods: number): Record<string, number> {
  const out: Record<string, number> = {};
  let requestsMs = 0;
  let delegatesMs = 0;
  for (const [k, v] of after) {
    const d = v - (before.get(k) ?? 0);
    if (d === 0) continue;
    const labels = Object.fromEntries(
      [...(k.match(/(\w+)="([^"]*)"/g) ?? [])].map((p) => p.replace(/"/g, '').split('=')),
    );
    const ms = (d * 1000) / pods;
    if (k.startsWith('steward_cni_request_duration_seconds_sum')) {
      out[`daemon${labels.command}Ms`] = Math.round(ms * 10) / 10;
      requestsMs += ms;
    } else if (k.startsWith('steward_cni_request_duration_seconds_count')) {
      out[`daemon${labels.command}CallsPerPod`] = Math.round((d / pods) * 100) / 100;
    } else if (k.startsWith('steward_plugin_duration_seconds_sum')) {
      out[`exec_${labels.plugin}_${labels.command}Ms`] = Math.round(ms * 10) / 10;
      delegatesMs += ms;
    } else if (k.startsWith('steward_journal_commit_seconds_sum')) {
      out[labels.synced === 'true' ? 'journalSyncedMs' : 'journalRelaxedMs'] = Math.round(ms * 100) / 100;
    } else if (k.startsWith('steward_journal_commit_seconds_count')) {
      out[labels.synced === 'true' ? 'journalSyncedCommitsPerPod' : 'journalRelaxedCommitsPerPod'] =
        Math.round((d / pods) * 100) / 100;
    } else if (k.startsWith('steward_queue_wait_seconds_sum')) {
      out.queueWaitMs = Math.round(ms * 100) / 100;
    }
  }
  out.daemonRequestsMs = Math.round(requestsMs * 10) / 10;
  out.delegateExecsMs = Math.round(delegatesMs * 10) / 10;
  out.daemonOwnMs = Math.round((requestsMs - delegatesMs) * 10) / 10;
  return out;
}

/** Wall ms of one `curl --unix-socket` process asking the daemon's /readyz (an executed C client). */
export function curlExecMs(socket: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    execFile('curl', ['-sS', '-f', '-o', '/dev/null', '--unix-socket', socket, 'http://localhost/readyz'], (err) =>
      err ? reject(err) : resolve(performance.now() - t0),
    );
  });
}
