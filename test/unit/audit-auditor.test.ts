// The daemon's audit passes run one at a time (a manual audit arriving during a pass waits for it),
// each outcome reaches onPass (a failed pass too), the periodic pass runs every interval until
// stopped; and `stewardd run`'s --audit-interval / --audit-release / --audit-grace are parsed and
// refused as documented. Root-free: the real runner on an empty node (temp dirs), the journal and
// the runtime injected.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Auditor, type PassOutcome } from '../../daemon/src/audit/auditor.js';
import type { AuditDeps } from '../../daemon/src/audit/run.js';
import { parseRunConfig } from '../../daemon/src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-auditor-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const log = pino({ level: 'silent' });

function deps(listSandboxes: () => Promise<string[] | null>): AuditDeps {
  return {
    journal: { attachmentsInState: () => [], stepsOf: () => [] },
    teardown: async () => ({ done: true }),
    run: async () => undefined,
    listSandboxes,
    runtime: () => ({ reachable: true, endpoint: 'unix:///x' }),
    leaseDirs: [join(dir, 'networks')],
    cacheDir: join(dir, 'results'),
    log,
  };
}

describe('audit passes', () => {
  it('a second pass waits for the one running, then makes its own', async () => {
    const order: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let asks = 0;
    const auditor = new Auditor(
      deps(async () => {
        asks += 1;
        if (asks === 1) await gate;
        return [];
      }),
      log,
    );
    const first = auditor.run({ release: false, graceMs: 0 }).then(() => order.push('first'));
    const second = auditor.run({ release: false, graceMs: 0 }).then(() => order.push('second'));
    while (asks === 0) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(asks, 1, 'the second pass has not started while the first runs');
    open();
    await Promise.all([first, second]);
    assert.equal(asks, 2);
    assert.deepEqual(order, ['first', 'second']);
  });

  it('every outcome reaches onPass, a failed pass too, and a failure does not block the next', async () => {
    const outcomes: PassOutcome[] = [];
    let fail = true;
    const d = deps(async () => []);
    d.journal = {
      attachmentsInState: () => {
        if (fail) throw new Error('journal unreadable');
        return [];
      },
      stepsOf: () => [],
    };
    const auditor = new Auditor(d, log, (o) => outcomes.push(o));
    await assert.rejects(auditor.run({ release: false, graceMs: 5 }), /journal unreadable/);
    fail = false;
    const r = await auditor.run({ release: true, graceMs: 7 });
    assert.deepEqual(r.orphans, []);
    assert.equal(outcomes.length, 2);
    assert.equal(outcomes[0]!.error?.message, 'journal unreadable');
    assert.equal(outcomes[0]!.report, undefined);
    assert.equal(outcomes[1]!.report, r);
    assert.equal(outcomes[1]!.graceMs, 7);
  });

  it('the periodic pass runs every interval, with its options, until stopped', async () => {
    const outcomes: PassOutcome[] = [];
    const auditor = new Auditor(
      deps(async () => []),
      log,
      (o) => outcomes.push(o),
    );
    auditor.startPeriodic({ intervalMs: 30, release: false, graceMs: 123 });
    // Two passes at least (each scans temp dirs: slower than 30 ms on a loaded machine), then stop.
    for (let i = 0; i < 500 && outcomes.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    await auditor.stop();
    const n = outcomes.length;
    assert.ok(n >= 2, `passes: ${n}`);
    assert.ok(outcomes.every((o) => o.graceMs === 123));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(outcomes.length, n, 'no pass after stop()');
  });
});

describe('stewardd run --audit-* flags', () => {
  it('off by default; durations parsed like --grace', () => {
    const d = parseRunConfig([]);
    assert.equal(d.auditIntervalMs, undefined);
    assert.equal(d.auditRelease, false);
    assert.equal(d.auditGraceMs, 15 * 60_000);
    const c = parseRunConfig(['--audit-interval', '1h30m', '--audit-release', '--audit-grace', '2h']);
    assert.equal(c.auditIntervalMs, 5_400_000);
    assert.equal(c.auditRelease, true);
    assert.equal(c.auditGraceMs, 7_200_000);
  });

  it('refuses bad durations, an interval under 1s, and --audit-release without an interval', () => {
    assert.throws(() => parseRunConfig(['--audit-interval', 'often']), /--audit-interval must be a duration/);
    assert.throws(() => parseRunConfig(['--audit-interval', '500ms']), /at least 1s/);
    assert.throws(() => parseRunConfig(['--audit-interval', '1m', '--audit-grace', '1d']), /--audit-grace must be/);
    assert.throws(() => parseRunConfig(['--audit-release']), /--audit-release needs --audit-interval/);
  });

  it('refuses an interval a timer cannot hold (Node fires a timer of more than 2^31-1 ms after 1 ms)', () => {
    assert.equal(parseRunConfig(['--audit-interval', '596h']).auditIntervalMs, 596 * 3_600_000);
    assert.throws(() => parseRunConfig(['--audit-interval', '600h']), /--audit-interval .*at most 596h/);
    assert.throws(() => parseRunConfig(['--audit-interval', `${'9'.repeat(400)}h`]), /at most 596h/);
  });
});
