// The journal's central promise, without root: every step of an ADD's chain is on disk (committed
// with the attachment, the first `adding` and the rest `planned`) before the first plugin runs; each
// step is `adding` before its plugin's ADD runs, and `deleting` before its DEL runs, for every step,
// not only the first. (Which of these commits are synced: docs/architecture.md, "Journal durability";
// test/integration/kill9-relaxed.test.ts kills the daemon right after the unsynced ones.)
// The engine writes to a real Store on a temporary SQLite file; a second Store on the same file (a
// second connection, which sees only committed rows) is read by the fake plugin runner at each call.
//
// Kills the defect "journal a step's row after its plugin runs, for every step after the first"
// (issue 20): with runChains inserting step i's row after step i's ADD, the chains of 2 and 3
// plugins and the two-delegate chain fail here; with teardown journaling `deleting` after the DEL,
// the rollback and DEL tests fail.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import type { PluginCall } from '../../daemon/src/plugins/executor.js';
import { Store } from '../../daemon/src/store/store.js';
import type { Step } from '../../daemon/src/store/types.js';
import { conf, req, setup } from '../helpers/engine-fakes.js';

const dir = mkdtempSync(join(tmpdir(), 'steward-journal-order-'));
const stores: Store[] = [];
after(() => {
  for (const s of stores) s.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** The engine on a fresh journal file, with a second connection that sees only committed rows. */
function journaled() {
  const path = join(dir, `journal-${++n}.db`);
  const store = new Store(path);
  const reader = new Store(path);
  stores.push(store, reader);
  return { ...setup({ store }), reader };
}

/**
 * At each plugin call, reads the committed journal through `reader` and records what is wrong:
 * ADD - the attachment `adding`; this step's row `adding`, every earlier step `added`, every later
 *       step of the chain `planned` (so `total` rows in all);
 * DEL - the attachment `deleting` and this step's row `deleting`.
 * Returns the list of problems (empty when the promise held at every call) and the calls seen.
 */
function watchJournal(
  env: ReturnType<typeof journaled>,
  containerId: string,
  network = 'net',
  ifname = 'eth0',
  fail?: { type: string; code: number },
  total?: number,
) {
  const problems: string[] = [];
  const seen: string[] = [];
  const check = (call: PluginCall): void => {
    const what = `${call.command} ${call.type}`;
    seen.push(what);
    const a = env.reader.currentAttachment({ containerId, network, ifname });
    if (!a) {
      problems.push(`${what}: no committed attachment`);
      return;
    }
    const steps = env.reader.stepsOf(a.id);
    const i = steps.findIndex((s: Step) => s.pluginType === call.type && s.ifname === call.ifname);
    const row = steps[i];
    if (!row) {
      problems.push(`${what}: its step is not committed (rows: ${steps.map((s) => s.pluginType).join(',')})`);
      return;
    }
    if (call.command === 'ADD') {
      if (a.state !== 'adding') problems.push(`${what}: attachment is ${a.state}, not adding`);
      if (row.state !== 'adding') problems.push(`${what}: step is ${row.state}, not adding`);
      for (const s of steps.slice(0, i))
        if (s.state !== 'added') problems.push(`${what}: earlier step ${s.pluginType} is ${s.state}, not added`);
      for (const s of steps.slice(i + 1))
        if (s.state !== 'planned') problems.push(`${what}: later step ${s.pluginType} is ${s.state}, not planned`);
      if (total !== undefined && steps.length !== total)
        problems.push(`${what}: ${steps.length} steps journaled, not the whole chain of ${total}`);
    } else {
      if (a.state !== 'deleting') problems.push(`${what}: attachment is ${a.state}, not deleting`);
      if (row.state !== 'deleting') problems.push(`${what}: step is ${row.state}, not deleting`);
    }
  };
  const types = new Set<string>();
  return {
    problems,
    seen,
    /** Installs the check as the behaviour of each plugin type. */
    on(...pluginTypes: string[]) {
      for (const t of pluginTypes) {
        types.add(t);
        env.plugins.on(t, (call) => {
          check(call);
          if (fail && call.type === fail.type && call.command === 'ADD') throw new CniError(fail.code, `${t} refuses`);
          if (call.command !== 'ADD') return undefined;
          return (
            call.stdin.prevResult ?? {
              cniVersion: call.stdin.cniVersion,
              interfaces: [{ name: call.ifname }],
              ips: [{ address: '10.1.0.2/24', interface: 0 }],
            }
          );
        });
      }
    },
  };
}

const chainOf = (k: number) => conf(['one', 'two', 'three'].slice(0, k).map((type) => ({ type })));

describe('journal before plugin (kills: a step journaled after its plugin runs)', () => {
  for (const k of [1, 2, 3]) {
    test(`ADD of a chain of ${k}: each step is committed "adding" before its plugin's ADD, no later step yet`, async () => {
      const env = journaled();
      const w = watchJournal(env, `c${k}`, 'net', 'eth0', undefined, k);
      w.on('one', 'two', 'three');
      await env.engine.handle(req('ADD', `c${k}`, chainOf(k)));
      assert.deepEqual(w.seen, ['ADD one', 'ADD two', 'ADD three'].slice(0, k));
      assert.deepEqual(w.problems, []);
      const a = env.reader.currentAttachment({ containerId: `c${k}`, network: 'net', ifname: 'eth0' })!;
      assert.equal(a.state, 'added');
      assert.deepEqual(
        env.reader.stepsOf(a.id).map((s) => s.state),
        Array(k).fill('added'),
      );
    });

    test(`DEL of an added chain of ${k}: each step is committed "deleting" before its plugin's DEL`, async () => {
      const env = journaled();
      const w = watchJournal(env, `d${k}`, 'net', 'eth0', undefined, k);
      w.on('one', 'two', 'three');
      await env.engine.handle(req('ADD', `d${k}`, chainOf(k)));
      await env.engine.handle(req('DEL', `d${k}`, chainOf(k)));
      assert.deepEqual(w.seen.slice(k), ['DEL three', 'DEL two', 'DEL one'].slice(3 - k));
      assert.deepEqual(w.problems, []);
    });
  }

  test('ADD of two delegates of two plugins: the second delegate’s steps too are committed before they run', async () => {
    const env = journaled();
    const two = conf([], '1.0.0', [
      { name: 'pod', cniVersion: '1.0.0', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'side', cniVersion: '1.0.0', plugins: [{ type: 'three' }, { type: 'four' }] },
    ]);
    const w = watchJournal(env, 'm', 'net', 'eth0', undefined, 4);
    w.on('one', 'two', 'three', 'four');
    await env.engine.handle(req('ADD', 'm', two));
    assert.deepEqual(w.seen, ['ADD one', 'ADD two', 'ADD three', 'ADD four']);
    assert.deepEqual(w.problems, []);
  });

  for (const k of [1, 2, 3]) {
    test(`rollback of a chain of ${k} whose last plugin fails: each rollback DEL runs after its "deleting" commit`, async () => {
      const env = journaled();
      const last = ['one', 'two', 'three'][k - 1]!;
      const w = watchJournal(env, `r${k}`, 'net', 'eth0', { type: last, code: 222 }, k);
      w.on('one', 'two', 'three');
      await assert.rejects(env.engine.handle(req('ADD', `r${k}`, chainOf(k))), (e: CniError) => e.code === 222);
      await env.engine.idle(`r${k}`); // the rollback runs after the answer
      const adds = ['ADD one', 'ADD two', 'ADD three'].slice(0, k);
      const dels = ['DEL three', 'DEL two', 'DEL one'].slice(3 - k);
      assert.deepEqual(w.seen, [...adds, ...dels]);
      assert.deepEqual(w.problems, []);
      const a = env.reader.currentAttachment({ containerId: `r${k}`, network: 'net', ifname: 'eth0' })!;
      assert.equal(a.state, 'deleted');
    });
  }
});
