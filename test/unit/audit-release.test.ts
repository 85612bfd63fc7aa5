// runAudit's releases on injected inputs (a fake journal, runtime and teardown; lease files in a temp
// dir): one teardown per journalled container whatever the number of its findings, each finding marked
// released only when that teardown finished, and no release (nor ask) after the runtime stopped answering.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { VERDICT_REASON } from '../../daemon/src/audit/decide.js';
import { RELEASE_BATCH, runAudit, type AuditDeps } from '../../daemon/src/audit/run.js';
import type { Attachment } from '../../daemon/src/store/types.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-audit-release-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const HOUR = 3600_000;
const X = 'x'.repeat(64);

/** An `added` attachment of `cid` on `net`, journalled two hours ago, with no network namespace left. */
const attachment = (id: number, cid: string): Attachment =>
  ({
    id,
    containerId: cid,
    network: 'net',
    ifname: 'eth0',
    netns: join(dir, 'no-such-netns'),
    state: 'added',
    updatedAt: Date.now() - 2 * HOUR,
  }) as Attachment;

/** A lease file of `cid` in a fresh dataDir, two hours old. */
function leaseDir(name: string, leases: Array<[string, string]>): string {
  const root = join(dir, name);
  mkdirSync(join(root, 'net'), { recursive: true });
  for (const [ip, cid] of leases) {
    const p = join(root, 'net', ip);
    writeFileSync(p, `${cid}\r\neth0`);
    const t = (Date.now() - 2 * HOUR) / 1000;
    utimesSync(p, t, t);
  }
  return root;
}

function deps(o: {
  attachments: Attachment[];
  leaseDir: string;
  teardown: (id: number) => { done: boolean; error?: Error };
  answers?: number;
}): AuditDeps & { asks: () => number; torn: number[]; logs: string[] } {
  let asks = 0;
  const torn: number[] = [];
  const logs: string[] = [];
  let state = new Map(o.attachments.map((a) => [a.id, a.state]));
  const log = pino({ level: 'warn' }, { write: (line: string) => logs.push(JSON.parse(line).msg as string) });
  return {
    journal: {
      attachmentsInState: (s) => o.attachments.filter((a) => state.get(a.id) === s),
      stepsOf: () => [],
    },
    teardown: async (id) => {
      torn.push(id);
      const out = o.teardown(id);
      if (out.done) state = new Map([...state, [id, 'deleted']]);
      return out;
    },
    run: async () => ({}) as never,
    listSandboxes: async () => (++asks > (o.answers ?? Infinity) ? null : []),
    runtime: () => ({ reachable: asks <= (o.answers ?? Infinity), endpoint: 'unix:///fake.sock' }),
    leaseDirs: [o.leaseDir],
    cacheDir: join(dir, 'no-results'),
    // The node read whole, no address on it: every finding here is proven unused.
    nodeAddresses: async () => ({ addresses: new Set(), namespaces: 1, unread: [] }),
    log,
    asks: () => asks,
    torn,
    logs,
  };
}

const released = (r: Awaited<ReturnType<typeof runAudit>>) =>
  r.orphans.map((f) => `${f.kind} ${f.containerId.slice(0, 1)} ${f.released}`).sort();

describe('audit releases', () => {
  it('a journalled container with an attachment and a lease: one teardown, both released', async () => {
    const d = deps({
      attachments: [attachment(1, X)],
      leaseDir: leaseDir('ok', [['10.1.0.5', X]]),
      teardown: () => ({ done: true }),
    });
    const r = await runAudit(d, { release: true, graceMs: HOUR });
    assert.deepEqual(released(r), ['attachment x true', 'lease x true']);
    assert.deepEqual(
      r.orphans.map((o) => [o.verdict, o.reason]),
      Array(2).fill(['release', VERDICT_REASON.release]),
    );
    assert.deepEqual(d.torn, [1]);
    assert.equal(d.logs.filter((m) => m.startsWith('audit: released an orphan')).length, 2, 'one line per finding');
  });

  it('its teardown fails: neither finding is reported released, and it is not tried twice in the pass', async () => {
    const d = deps({
      attachments: [attachment(1, X)],
      leaseDir: leaseDir('fail', [['10.1.0.5', X]]),
      teardown: () => ({ done: false, error: new Error('bridge DEL failed') }),
    });
    const r = await runAudit(d, { release: true, graceMs: HOUR });
    assert.deepEqual(released(r), ['attachment x false', 'lease x false']);
    assert.deepEqual(
      r.orphans.map((o) => o.reason),
      ['release failed: bridge DEL failed', 'its release group was tried earlier in this pass and did not finish'],
    );
    assert.deepEqual(d.torn, [1]);
    assert.equal(d.logs.filter((m) => m.startsWith('audit: released an orphan')).length, 0);
  });

  it('the runtime stops answering: no release and no ask after the failed one; the report says it was lost', async () => {
    // One batch of releases on the pass's own ask, then a re-ask that fails: the rest only reported.
    const ids = Array.from({ length: RELEASE_BATCH + 2 }, (_, i) => i.toString(16).padStart(64, '0'));
    const d = deps({
      attachments: ids.map((cid, i) => attachment(i + 1, cid)),
      leaseDir: leaseDir('lost', []),
      teardown: () => ({ done: true }),
      answers: 1, // the pass's own ask
    });
    const r = await runAudit(d, { release: true, graceMs: HOUR });
    assert.equal(r.orphans.filter((o) => o.released).length, RELEASE_BATCH);
    assert.deepEqual(
      r.orphans.filter((o) => !o.released).map((o) => o.reason),
      Array(2).fill('releases stopped: the runtime stopped answering during the pass'),
    );
    assert.equal(d.asks(), 2);
    assert.equal(r.runtime.lostDuringPass, true);
    assert.ok(d.logs.includes('audit: the runtime stopped answering; no more releases this pass'));
  });

  it("a dual-stack interface's two leases: one host-local DEL frees both, and both are reported released", async () => {
    const Z = 'f'.repeat(64);
    const root = leaseDir('dual', [
      ['10.1.0.7', Z],
      ['fd00::7', Z],
    ]);
    const dels: string[] = [];
    const d = deps({ attachments: [], leaseDir: root, teardown: () => ({ done: true }) });
    // host-local's DEL frees every lease of the container and interface in the network's directory.
    d.run = async (call) => {
      dels.push(`${call.command} ${call.type} ${call.containerId.slice(0, 1)}`);
      for (const ip of ['10.1.0.7', 'fd00::7']) rmSync(join(root, 'net', ip), { force: true });
      return {} as never;
    };
    const r = await runAudit(d, { release: true, graceMs: HOUR });
    assert.deepEqual(released(r), ['lease f true', 'lease f true']);
    assert.deepEqual(dels, ['DEL host-local f'], 'one DEL for the group');
  });
});
