// A pod whose delegate hangs on DEL, through containerd 1.6's CRI plugin driven as the kubelet drives it
// (test/helpers/cri/): the installed chain ends with the fault fixture holding every DEL while a gate
// file exists, and the steward entry bounds the shim's DEL at 8 s (`timeouts.del`), so stewardd's answer
// budget is 6 s (engine/answer-budget.ts). StopPodSandbox's DEL is answered by stewardd once that budget
// passes, inside the shim's bound and never spooled, while the teardown goes on; RemovePodSandbox's DEL
// (its second stop) joins that teardown and is answered at once. Before (ddd30b9), the Stop waited out
// the shim's bound (spooled) and the Remove waited it out again: 60 s a pod at the default bound. Once
// the gate is gone the teardown finishes: the attachment deleted, no lease, nothing of the pod left.
// docs/teardown.md, "A DEL whose plugin hangs"; the shim-level test is test/integration/del-budget.test.ts.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, renameSync, rmSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { delAnswerBudgetMs } from '../../daemon/src/engine/answer-budget.js';
import { fixtureCalls } from '../helpers/env.js';
import { fixturePlugin } from '../helpers/netconf.js';
import type { CriNode } from '../helpers/cri/node.js';
import { startCriSuite } from '../helpers/cri/suite.js';
import { iptablesBaseline, settledResidue } from '../helpers/cri/residue.js';
import { figure, round, within } from '../helpers/cri/scenario.js';

/** The shim's DEL bound set in the installed conflist; stewardd answers at its budget, 6 s. */
const DEL_BOUND_MS = 8000;
const BUDGET_MS = delAnswerBudgetMs({ del: DEL_BOUND_MS });
/** Slack under the budget for the Stop's lower bound (the budget runs from the DEL's arrival). */
const EARLY_MARGIN_MS = 2000;
/** RemovePodSandbox's DEL joins the running teardown: answered without waiting for the delegate. */
const REMOVE_MAX_MS = 2000;
const NOTHING = { leases: 0, veths: 0, netns: 0, cacheFiles: 0, cniChains: 0, rules: 0, shims: 0 };

const suite = await startCriSuite('e2e-cri-del-hang', 'containerd CRI hung-DEL end-to-end test');
const { env, node, kubelet, skip } = suite;

after(() => suite.finish());

/** The steward entry of the conflist the CRI plugin has loaded now (Status verbose, go-cni's Source). */
async function loadedEntry(n: CriNode): Promise<Record<string, unknown> | undefined> {
  const cni = JSON.parse((await n.cri.status(true)).info.cniconfig ?? '{}') as {
    Networks?: Array<{ Config: { Name: string; Source: string } }>;
  };
  const net = (cni.Networks ?? []).find((x) => x.Config.Name === 'steward');
  return net ? JSON.parse(net.Config.Source).plugins?.[0] : undefined;
}

/** Replaces `file` whole (temp file, rename): the CRI plugin never loads half of it. */
function replaceFile(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

/** stewardd's count of DELs answered by joining one in flight (steward_del_coalesced_total). */
async function joinedDels(n: CriNode): Promise<number> {
  const m = /^steward_del_coalesced_total\{how="joined"\} (\S+)$/m.exec((await n.daemon.get('/metrics')).text);
  return Number(m?.[1] ?? NaN);
}

describe("a DEL hung in a delegate, through containerd 1.6's CRI plugin", { skip }, () => {
  it(`StopPodSandbox answered by stewardd at its ${BUDGET_MS} ms budget (shim bound ${DEL_BOUND_MS} ms), not spooled; RemovePodSandbox at once; the teardown finishes once the delegate does`, async () => {
    const n = node!;
    const k = kubelet!;
    const fx = join(env.dir, 'fixture-hang');
    const gate = join(env.dir, 'del-gate');
    // Registered last, so it runs first at close: a held fixture DEL ends before anything is torn down.
    env.defer(() => rmSync(gate, { force: true }));
    await n.setChain([fixturePlugin(fx, { holdDelWhileFile: gate })]);

    // `stewardd install` writes no `timeouts`: the test adds it to the conflist the watcher wrote. The
    // watcher then calls the file foreign and leaves it alone (not ready) until it is put back.
    const conflist = join(n.confDir, '00-steward.conflist');
    const installed = readFileSync(conflist, 'utf8');
    const bounded = JSON.parse(installed);
    bounded.plugins[0].timeouts = { del: DEL_BOUND_MS };
    replaceFile(conflist, `${JSON.stringify(bounded, null, 2)}\n`);
    const spoolDir = String(bounded.plugins[0].spoolDir);
    // Made as the shim makes it (0700), so a DEL it spools shows in the watch below even if ingested at once.
    mkdirSync(spoolDir, { recursive: true, mode: 0o700 });
    const spooled: string[] = [];
    const spoolWatch = watch(spoolDir, (_e, f) => void (f && spooled.push(f)));
    try {
      await within('the CRI plugin loads the bounded conflist', 30_000, async () =>
        isDeepStrictEqual((await loadedEntry(n))?.timeouts, { del: DEL_BOUND_MS }),
      );
      const baseline = iptablesBaseline();
      const pod = k.pod('del-hang');
      const run = await k.runPod(pod);
      assert.ok(run.id, `RunPodSandbox: ${run.error?.message}`);
      const id = run.id!;
      const attachment = async () => (await n.daemon.get(`/v1/attachments?containerId=${id}`)).json[0];
      assert.equal((await attachment())?.state, 'added');

      writeFileSync(gate, '');
      const stop = await k.stopSandbox(id);
      assert.ok(stop.ok && stop.attempts === 1, `StopPodSandbox at its first attempt: ${JSON.stringify(stop)}`);
      assert.ok(stop.ms < DEL_BOUND_MS, `StopPodSandbox took ${round(stop.ms)} ms: the shim's bound, not stewardd`);
      assert.ok(
        stop.ms > BUDGET_MS - EARLY_MARGIN_MS,
        `StopPodSandbox took ${round(stop.ms)} ms: answered before the budget, so not by it`,
      );
      assert.equal(fixtureCalls(fx, 'DELDONE').length, 0, 'answered while the delegate still holds its DEL');
      assert.equal((await attachment()).state, 'deleting', 'the teardown is journaled and still running');
      const spooledAtStop = spooled.filter((f) => f.includes(id));

      const joined0 = await joinedDels(n);
      const t0 = performance.now();
      await k.cri.removePodSandbox(id);
      const removeMs = performance.now() - t0;
      assert.ok(removeMs < REMOVE_MAX_MS, `RemovePodSandbox took ${round(removeMs)} ms`);
      const joined = (await joinedDels(n)) - joined0;
      assert.equal(joined, 1, "RemovePodSandbox's DEL joined the running teardown");
      assert.deepEqual(
        spooledAtStop,
        [],
        "stewardd answered StopPodSandbox's DEL: the shim's fallback never spooled it",
      );
      assert.deepEqual(
        spooled.filter((f) => f.includes(id)),
        [],
        "stewardd answered RemovePodSandbox's DEL: not spooled",
      );
      assert.equal(fixtureCalls(fx, 'DEL').length, 1, 'one delegate DEL while held, for both runtime DELs');
      assert.equal(fixtureCalls(fx, 'DELDONE').length, 0, 'the delegate still holds it');

      rmSync(gate);
      const deletedMs = await within('the attachment deleted and no lease left', 30_000, async () => {
        return (await attachment()).state === 'deleted' && n.leases().length === 0;
      });
      const { residue } = await settledResidue(n, [id], baseline, 10_000);
      assert.deepEqual(residue, NOTHING, 'nothing of the pod left');
      assert.equal(fixtureCalls(fx, 'DELDONE').length, 1, "the delegate's DEL finished");
      assert.equal(fixtureCalls(fx, 'DEL').length, 1, 'and was not run again');
      assert.equal((await n.daemon.status()).teardownQueue.depth, 0, 'no teardown pending');
      figure('DEL held in a delegate', {
        shimBoundMs: DEL_BOUND_MS,
        budgetMs: BUDGET_MS,
        stopMs: round(stop.ms),
        removeMs: round(removeMs),
        msToDeletedAfterRelease: round(deletedMs),
        spooled: spooled.length,
        fixtureDels: fixtureCalls(fx, 'DEL').length,
      });
    } finally {
      spoolWatch.close();
      // The watcher's own conflist back: it is ours again (ready) and follows the primary.
      replaceFile(conflist, installed);
    }
  });
});
