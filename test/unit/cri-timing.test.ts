// The per-pod breakdown of the CRI timing scenario (test/helpers/cri/timing.ts): stewardd's request
// and delegate histograms, differenced between two /metrics readings and divided per pod.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { histogramSums, perPod } from '../helpers/cri/timing.js';

const metrics = (addSum: number, delSum: number, bridgeAdd: number, n: number) =>
  [
    '# HELP steward_cni_request_duration_seconds Time to answer a CNI request',
    `steward_cni_request_duration_seconds_bucket{le="0.005",command="ADD"} 0`,
    `steward_cni_request_duration_seconds_sum{command="ADD"} ${addSum}`,
    `steward_cni_request_duration_seconds_count{command="ADD"} ${n}`,
    `steward_cni_request_duration_seconds_sum{command="DEL"} ${delSum}`,
    `steward_cni_request_duration_seconds_count{command="DEL"} ${2 * n}`,
    `steward_plugin_duration_seconds_sum{plugin="bridge",command="ADD"} ${bridgeAdd}`,
    `steward_plugin_duration_seconds_count{plugin="bridge",command="ADD"} ${n}`,
    'steward_cni_requests_total{command="ADD",code="0"} 99',
  ].join('\n');

test('per pod: each command, each delegate execution, and the daemon own path as requests minus delegates', () => {
  const before = histogramSums(metrics(1, 0.5, 0.6, 10));
  assert.equal(before.get('steward_cni_request_duration_seconds_sum{command="ADD"}'), 1);
  assert.equal(before.size, 6, 'sums and counts only, no buckets or counters');
  const after = histogramSums(metrics(1.4, 0.7, 0.9, 14));
  const p = perPod(before, after, 4);
  assert.equal(p.daemonADDMs, 100);
  assert.equal(p.daemonDELMs, 50);
  assert.equal(p.daemonADDCallsPerPod, 1);
  assert.equal(p.daemonDELCallsPerPod, 2);
  assert.equal(p.exec_bridge_ADDMs, 75);
  assert.equal(p.daemonRequestsMs, 150);
  assert.equal(p.delegateExecsMs, 75);
  assert.equal(p.daemonOwnMs, 75);
});

test("per pod: the journal's synced and relaxed commits and the queue wait, from their own histograms", () => {
  const text = (synced: number, syncedN: number, relaxed: number, relaxedN: number, wait: number) =>
    [
      `steward_journal_commit_seconds_sum{synced="true"} ${synced}`,
      `steward_journal_commit_seconds_count{synced="true"} ${syncedN}`,
      `steward_journal_commit_seconds_sum{synced="false"} ${relaxed}`,
      `steward_journal_commit_seconds_count{synced="false"} ${relaxedN}`,
      `steward_queue_wait_seconds_sum ${wait}`,
      `steward_queue_wait_seconds_count 7`,
    ].join('\n');
  const p = perPod(histogramSums(text(0.1, 10, 0.01, 40, 0.2)), histogramSums(text(0.14, 14, 0.03, 56, 0.21)), 4);
  assert.equal(p.journalSyncedMs, 10);
  assert.equal(p.journalSyncedCommitsPerPod, 1);
  assert.equal(p.journalRelaxedMs, 5);
  assert.equal(p.journalRelaxedCommitsPerPod, 4);
  assert.equal(p.queueWaitMs, 2.5);
  // The journal and queue figures are part of the daemon's own path, not added to the requests.
  assert.equal(p.daemonRequestsMs, 0);
});
