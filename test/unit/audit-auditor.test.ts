// The daemon's audit passes run one at a time (a manual audit arriving during a pass waits for it),
// each outcome reaches onPass (a failed pass too), the periodic pass runs every interval until
// stopped; and `stewardd run`'s --audit-interval / --audit-release / --audit-grace are parsed and
// refused as documented. Root-free: the real runner on an empty node (temp dirs), the journal and
// the runtime injected.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Auditor, type PassOutcome } from '../../daemon/src/audit/auditor.js';
import type { AuditDeps } from '../../daemon/src/audit/run.js';
import type { RuntimeSource } from '../../daemon/src/audit/runtime.js';
import { parseRunConfig } from '../../daemon/src/config.js';
import { captureLog } from '../helpers/log-capture.js';

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

/** A lease dir holding one old lease of an unlisted, unjournalled container (a proven leftover). */
function leftover(name: string): string {
  const root = join(dir, name);
  mkdirSync(join(root, 'net'), { recursive: true });
  const p = join(root, 'net', '10.1.0.5');
  writeFileSync(p, `${'c'.repeat(64)}\r\neth0`);
  const t = (Date.now() - 2 * 3600_000) / 1000;
  utimesSync(p, t, t);
  return root;
}

/** The deps of a node with that leftover, the node read whole with no address on it; DELs recorded. */
function nodeWithLeftover(name: string, dels: string[], listSandboxes: () => Promise<string[] | null>): AuditDeps {
  const root = leftover(name);
  return {
    ...deps(listSandboxes),
    leaseDirs: [root],
    run: async (call) => {
      dels.push(`${call.command} ${call.type}`);
      rmSync(join(root, 'net', '10.1.0.5'), { force: true }); // host-local's DEL frees it
      return undefined;
    },
    nodeAddresses: async () => ({ addresses: new Set(), namespaces: 1, unread: [] }),
  };
}

describe('a pass given another runtime', () => {
  it('asks that runtime, reports it, keeps no sightings of its view, and closes it when the pass ends', async () => {
    const events: string[] = [];
    const other: RuntimeSource = {
      listSandboxes: async () => {
        events.push('list');
        return ['d'.repeat(64)];
      },
      version: async () => ({ error: 'unused', endpoint: null }),
      info: () => ({ reachable: true, endpoint: 'unix:///other.sock', sandboxes: 1 }),
      close: () => events.push('close'),
    };
    const saved: number[] = [];
    const d: AuditDeps = {
      ...nodeWithLeftover('other-rt', [], async () => {
        events.push('own');
        return [];
      }),
      sightings: { load: () => new Map(), save: (s) => saved.push(s.size) },
    };
    const at: string[] = [];
    const auditor = new Auditor(d, log, undefined, (socket) => {
      at.push(socket);
      return other;
    });
    const r = await auditor.run({ release: false, graceMs: 0, runtimeEndpoint: '/other.sock' });
    assert.deepEqual(at, ['/other.sock']);
    assert.deepEqual(events, ['list', 'close'], "the daemon's own runtime is not asked");
    assert.deepEqual(r.runtime, { reachable: true, endpoint: 'unix:///other.sock', sandboxes: 1 });
    assert.equal(r.orphans.length, 1);
    assert.deepEqual(saved, [], 'another runtime view never becomes sightings');
    // Without an endpoint, the daemon's own runtime, and its sightings move on.
    await auditor.run({ release: false, graceMs: 0 });
    assert.deepEqual(events, ['list', 'close', 'own']);
    assert.deepEqual(saved, [1]);
  });
});

describe("a pass's deadline", () => {
  it('counts from the request: a pass queued behind a longer one starts no release', async () => {
    const dels: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let asks = 0;
    const auditor = new Auditor(
      nodeWithLeftover('queued', dels, async () => {
        asks += 1;
        if (asks === 1) await gate;
        return [];
      }),
      log,
    );
    const first = auditor.run({ release: false, graceMs: 0 });
    const second = auditor.run({ release: true, graceMs: 0, deadlineMs: 20 });
    // The first pass holds the second past its 20 ms deadline (a lower bound: waiting longer is as good).
    await new Promise((r) => setTimeout(r, 60));
    open();
    await first;
    const r = await second;
    assert.equal(r.deadlineReached, true);
    assert.deepEqual(dels, []);
    // Not queued, with time left: the same leftover goes.
    const third = await auditor.run({ release: true, graceMs: 0, deadlineMs: 60_000 });
    assert.equal(third.deadlineReached, undefined);
    assert.deepEqual(dels, ['DEL host-local']);
  });
});

describe('the periodic pass says what it found', () => {
  async function onePeriodicPass(d: AuditDeps, release: boolean) {
    const { rows: lines, log: plog } = captureLog();
    const outcomes: PassOutcome[] = [];
    const auditor = new Auditor(d, plog, (o) => outcomes.push(o));
    auditor.startPeriodic({ intervalMs: 5, release, graceMs: 0 });
    for (let i = 0; i < 500 && outcomes.length < 1; i++) await new Promise((r) => setTimeout(r, 10));
    await auditor.stop();
    await new Promise((r) => setTimeout(r, 20)); // its log line follows its outcome
    return lines.filter((l) => String(l.msg).startsWith('periodic audit'));
  }

  it('orphans left held: a warning with the counts', async () => {
    const lines = await onePeriodicPass(
      nodeWithLeftover('periodic-held', [], async () => []),
      false,
    );
    const found = lines.find((l) => l.msg === 'periodic audit: orphans held on the node');
    assert.equal(found?.orphans, 1);
    assert.equal(found?.released, 0);
    assert.equal(found?.level, 40);
  });

  it('every orphan released: done, at info', async () => {
    const dels: string[] = [];
    const lines = await onePeriodicPass(
      nodeWithLeftover('periodic-released', dels, async () => []),
      true,
    );
    assert.deepEqual(dels, ['DEL host-local']);
    const done = lines.find((l) => l.msg === 'periodic audit done');
    assert.equal(done?.orphans, 1);
    assert.equal(done?.released, 1);
    assert.equal(
      lines.some((l) => l.msg === 'periodic audit: orphans held on the node'),
      false,
    );
  });

  it('a failed pass is logged as an error, and the next one still comes', async () => {
    const d = deps(async () => []);
    let calls = 0;
    d.journal = {
      attachmentsInState: () => {
        calls += 1;
        throw new Error('journal unreadable');
      },
      stepsOf: () => [],
    };
    const { rows: lines, log: plog } = captureLog();
    const auditor = new Auditor(d, plog);
    auditor.startPeriodic({ intervalMs: 5, release: false, graceMs: 0 });
    for (let i = 0; i < 500 && lines.filter((l) => l.msg === 'periodic audit failed').length < 2; i++)
      await new Promise((r) => setTimeout(r, 10));
    await auditor.stop();
    const failed = lines.filter((l) => l.msg === 'periodic audit failed');
    assert.ok(failed.length >= 2, `failed passes logged: ${failed.length}`);
    assert.equal(failed[0]?.err, 'journal unreadable');
    assert.equal(failed[0]?.level, 50);
    assert.ok(calls >= 2);
  });
});

describe('stopping the periodic pass', () => {
  it('stop() during a pass waits for it, and no pass follows it', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let asks = 0;
    const outcomes: PassOutcome[] = [];
    const auditor = new Auditor(
      deps(async () => {
        asks += 1;
        if (asks === 1) await gate;
        return [];
      }),
      log,
      (o) => outcomes.push(o),
    );
    auditor.startPeriodic({ intervalMs: 5, release: false, graceMs: 0 });
    for (let i = 0; i < 500 && asks === 0; i++) await new Promise((r) => setTimeout(r, 10));
    let stopped = false;
    const stopping = auditor.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(stopped, false, 'stop() waits for the pass in flight');
    open();
    await stopping;
    assert.equal(outcomes.length, 1);
    // Many intervals later: no pass was scheduled after the one stop() waited for.
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(asks, 1);
    assert.equal(outcomes.length, 1);
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
