// The CLI's human output (daemon/src/cli/format.ts) as pure functions of the API's JSON and a clock.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  duration,
  formatAudit,
  formatStatus,
  pod,
  printable,
  printableJson,
  table,
  when,
} from '../../daemon/src/cli/format.js';
import { runCli } from '../../daemon/src/cli/index.js';

describe('CLI time formatting', () => {
  test('durations are short and next retries say how far away they are', () => {
    assert.equal(duration(5), '5s');
    assert.equal(duration(125), '2m05s');
    assert.equal(duration(3 * 3600 + 120), '3h02m');
    assert.equal(duration(2 * 86400 + 3600), '2d01h');
    const now = Date.parse('2026-01-01T10:00:00.000Z');
    assert.equal(when('2026-01-01T10:00:30.000Z', now), '10:00:30Z (in 30s)');
    assert.equal(when('2026-01-01T09:59:00.000Z', now), '09:59:00Z (overdue 1m00s)');
    assert.equal(when(null, now), '-');
  });
});

describe('CLI status table', () => {
  const row = (step: number, state: string) => ({
    step,
    attachment: step,
    containerId: `ctr-${step}-0123456789abcdef`,
    podNamespace: 'ns',
    podName: `p${step}`,
    podUid: 'u',
    plugin: 'portmap',
    delegate: 'd',
    ifname: 'eth0',
    state,
    attempts: 3,
    lastError: 'iptables: Resource\ntemporarily unavailable',
    nextAttemptAt: state === 'abandoned' ? null : '2026-01-01T10:01:00.000Z',
    failingSince: '2026-01-01T09:00:00.000Z',
  });
  const status = {
    version: '1.2.3',
    uptimeSeconds: 4000,
    ready: false,
    attachments: { added: 3, deleting: 12 },
    steps: { del_failed: 12, abandoned: 1 },
    teardownQueue: { depth: 12, oldestPendingSeconds: 3600, nextAttemptAt: '2026-01-01T10:00:05.000Z' },
    executions: { slots: 8, inUse: 1, queued: 0 },
    lastErrors: [row(1, 'del_failed'), row(2, 'abandoned')],
  };

  test('names pod, plugin, attempts and next retry; says when rows are cut and what to do about abandoned steps', () => {
    const out = formatStatus(status, Date.parse('2026-01-01T10:00:00.000Z'));
    assert.match(out, /^stewardd 1\.2\.3, up 1h06m, NOT READY$/m);
    assert.match(out, /^teardowns: +12 pending \(oldest 1h00m\), 1 abandoned, next retry 10:00:05Z \(in 5s\)$/m);
    assert.match(
      out,
      /^1 +ns\/p1 +ctr-1-012345 +portmap +del_failed +3 +10:01:00Z \(in 1m00s\) +iptables: Resource temporarily unavailable$/m,
    );
    assert.match(out, /^2 +ns\/p2 +ctr-2-012345 +portmap +abandoned +3 +never \(abandoned\) /m);
    assert.match(out, /^\(2 of 13 shown: stewardd teardowns lists them all\)$/m);
    assert.match(out, /1 abandoned step\(s\): release what they hold by hand/);
  });
});

describe('CLI pod column', () => {
  test('namespace/name, the name alone, or "-" when the runtime (or an older daemon) names no pod', () => {
    assert.equal(pod({ podNamespace: 'ns', podName: 'web-0' }), 'ns/web-0');
    assert.equal(pod({ podNamespace: null, podName: 'quirky_turing' }), 'quirky_turing');
    assert.equal(pod({ podNamespace: null, podName: null }), '-');
    assert.equal(pod({}), '-');
  });
});

describe('CLI audit table', () => {
  const orphan = (released: boolean) => ({
    kind: 'lease' as const,
    containerId: 'b'.repeat(64),
    network: 'cbr0',
    ifname: 'eth0',
    ip: '10.77.0.10',
    path: '/var/lib/cni/networks/cbr0/10.77.0.10',
    ageSeconds: 7200,
    journalled: false,
    verdict: released ? 'release' : 'young',
    released,
    reason: 'why',
  });
  test('the runtime line: listed sandboxes; unreachable from the start; or lost during the pass', () => {
    const ok = formatAudit({
      orphans: [orphan(false)],
      runtime: { reachable: true, endpoint: 'unix:///c.sock', sandboxes: 3 },
    });
    assert.match(ok, /^runtime: unix:\/\/\/c\.sock \(3 sandboxes\)\nKIND +CONTAINER/);
    assert.match(
      ok,
      /lease +bbbbbbbbbbbbb +cbr0 +eth0 +10\.77\.0\.10 +2h00m +no +young +no +\/var\/lib\/cni\/networks\/cbr0\/10\.77\.0\.10/,
    );
    const down = { reachable: false, endpoint: 'unix:///c.sock', message: 'ListPodSandbox failed: x' };
    assert.match(
      formatAudit({ orphans: [orphan(false)], runtime: down }),
      /^runtime: UNREACHABLE unix:\/\/\/c\.sock: ListPodSandbox failed: x; every finding is owner-unknown and nothing was released$/m,
    );
    // Lost during the pass, at its first re-ask or after releases: never "owner-unknown".
    for (const orphans of [[orphan(false)], [orphan(true), orphan(false)]]) {
      const lost = formatAudit({ orphans, runtime: { ...down, lostDuringPass: true } });
      assert.match(
        lost,
        /^runtime: LOST DURING THE PASS unix:\/\/\/c\.sock: ListPodSandbox failed: x; nothing was released after that/m,
      );
      assert.doesNotMatch(lost, /owner-unknown/);
    }
    assert.match(
      formatAudit({ orphans: [], runtime: { reachable: true, endpoint: 'e', sandboxes: 0 } }),
      /\nno orphans$/,
    );
  });
});

describe('table cells are printable', () => {
  test('terminal escapes, C1 controls and bidi overrides from plugin errors and pod names are shown, not obeyed', () => {
    const out = table(
      ['POD', 'LAST ERROR'],
      [
        ['web\u202eexe.1sj', '\u001b[2J\u001b]0;PWNED\u0007\u001b[31mFAKE: all teardowns done'],
        ['ok\u009bx', 'tab\there'],
      ],
    );
    // eslint-disable-next-line no-control-regex -- none may be left
    assert.doesNotMatch(out, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    assert.match(out, /web\\u202eexe\.1sj/);
    assert.match(out, /\\x1b\[2J\\x1b\]0;PWNED\\x07\\x1b\[31mFAKE/);
    assert.match(out, /ok\\x9bx/);
    assert.match(out, /tab\\x09here/);
    assert.equal(printable('plain text, ünïcode ok'), 'plain text, ünïcode ok');
  });
});

describe('-o json and --timeout', () => {
  test('-o json escapes what printable() escapes, as JSON escapes: the same JSON, nothing raw', () => {
    const value = { lastError: 'plugin said \u202eevil\u202c, \u0085next, \u007f, \u2067x\u2069 and \u061c', n: 'é ✓' };
    const text = printableJson(JSON.stringify(value, null, 2));
    assert.deepEqual(JSON.parse(text), value, 'the same JSON');
    assert.doesNotMatch(text, /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/);
    assert.match(text, /plugin said \\u202eevil\\u202c, \\u0085next, \\u007f, \\u2067x\\u2069 and \\u061c/);
    assert.match(text, /é ✓/, 'other characters as they are');
    assert.match(text, /\n {2}"n"/, 'the layout kept');
  });

  test('--timeout past 596 h (what a timer holds, and the longest audit deadline) is a usage error, exit 2', async () => {
    const errors: string[] = [];
    const real = console.error;
    console.error = (m: string) => void errors.push(m);
    try {
      for (const [command, t] of [
        ['status', '1e9'],
        ['audit', '2200000'],
        ['status', 'Infinity'],
        ['teardowns', '0'],
      ] as const)
        assert.equal(await runCli(command, ['--timeout', t, '--socket', '/nonexistent/s.sock']), 2, `${command} ${t}`);
    } finally {
      console.error = real;
    }
    assert.equal(errors.length, 4);
    for (const e of errors)
      assert.match(e, /--timeout must be a number of seconds above 0 and at most 2145600 \(596 h\), got "/);
  });

  test('--limit that is not a whole number from 1 to 100000 is a usage error, exit 2, before any request', async () => {
    const errors: string[] = [];
    const real = console.error;
    console.error = (m: string) => void errors.push(m);
    const bad = ['abc', '0', '100001', '0x10', '1e3', ' 5', ''];
    try {
      for (const limit of bad)
        assert.equal(await runCli('attachments', ['--limit', limit, '--socket', '/nonexistent/s.sock']), 2, limit);
      // A good one gets as far as the socket: exit 3, it does not exist.
      assert.equal(await runCli('attachments', ['--limit', '100000', '--socket', '/nonexistent/s.sock']), 3);
    } finally {
      console.error = real;
    }
    for (const [i, limit] of bad.entries())
      assert.match(errors[i] ?? '', new RegExp(`--limit must be a whole number from 1 to 100000, got "${limit}"`));
  });
});
