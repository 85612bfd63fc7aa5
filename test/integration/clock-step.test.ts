// Retries across a wall-clock step, on the real daemon (issue 19 item 4; docs/teardown.md "Retry schedule
// and clock steps"). The test-only STEWARD_TEST_CLOCK_OFFSET_MS shifts the daemon's wall clock, so two runs
// of one journal see the node's clock stepped between them. The fixture's DEL fails while a file exists.
// In-run steps are covered by the unit tests with an injected clock (test/unit/retry-clock.test.ts).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('clock-step');
after(() => env.close());

const DAY = 24 * 3_600_000;
const offset = (ms: number) => ({ STEWARD_TEST_CLOCK_OFFSET_MS: String(ms) });

/** A daemon whose fixture DEL fails until healed; ADD then DEL of `cid`, until `fails` DELs failed. */
async function failingTeardown(name: string, cid: string, firstOffsetMs: number) {
  const broken = join(env.dir, `${name}-broken`);
  const fx = join(env.dir, `${name}-fx`);
  writeFileSync(broken, '');
  env.defer(() => rmSync(broken, { force: true }));
  // Default bounds (50 attempts, 24 h max age); backoff 200 ms to a 1 s cap.
  const d = new Daemon(env, {
    name,
    args: ['--retry-base-ms', '200', '--retry-max-ms', '1000'],
    env: offset(firstOffsetMs),
  });
  await d.start();
  const conf = stewardConf(d.socket, '1.0.0', [
    delegate(`${name}net`, '1.0.0', [fixturePlugin(fx, { failDelWhileFile: broken })]),
  ]);
  assert.equal((await shim({ command: 'ADD', containerId: cid, netns: env.netns() }, conf)).code, 0);
  assert.equal((await shim({ command: 'DEL', containerId: cid, netns: '' }, conf)).code, 0, 'deferred: success');
  const dels = () => fixtureCalls(fx, 'DEL').length;
  await d.waitFor('two failed DELs', () => dels() >= 2, 30_000);
  return { d, dels, heal: () => rmSync(broken) };
}

describe('teardown retries across a wall-clock step between two runs', () => {
  it('two days forward: retries go on (not abandoned for age), and the step is torn down once healed', async () => {
    const { d, dels, heal } = await failingTeardown('fwd', 'clock-fwd', 0);
    await d.stop();
    d.extraEnv = offset(2 * DAY);
    await d.start();
    const n = dels();
    await d.waitFor('two more failed DELs in the run two days later', () => dels() >= n + 2, 30_000);
    assert.equal((await d.status()).steps.abandoned ?? 0, 0, 'the 24 h max age counts pending time, not the wall');
    assert.equal((await d.attachment('clock-fwd')).state, 'deleting');
    heal();
    await d.waitFor(
      'the teardown to finish',
      async () => (await d.attachment('clock-fwd')).state === 'deleted',
      30_000,
    );
    await d.stop();
  });

  it('a day back: the pending retry runs within the backoff cap of healing, not a day later', async () => {
    const { d, heal } = await failingTeardown('back', 'clock-back', DAY);
    await d.stop();
    d.extraEnv = offset(0);
    await d.start();
    heal();
    const t0 = Date.now();
    await d.waitFor(
      'the teardown to finish',
      async () => (await d.attachment('clock-back')).state === 'deleted',
      30_000,
    );
    assert.ok(Date.now() - t0 < 15_000, 'within 15 s (cap 1 s), not a day');
    await d.stop();
  });
});
