import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Gate } from '../../daemon/src/engine/gate.js';
import { deferred, settle } from '../helpers/async.js';

/** A holder that records when it starts and stays inside the gate until released. */
function holder(log: string[], label: string) {
  const d = deferred();
  return {
    release: () => d.resolve(),
    work: async () => {
      log.push(`start ${label}`);
      await d.promise;
      log.push(`end ${label}`);
      return label;
    },
  };
}

describe('Gate', () => {
  test('shared holders run together', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const h1 = holder(log, 's1');
    const h2 = holder(log, 's2');
    const h3 = holder(log, 's3');
    const p = [gate.shared(h1.work), gate.shared(h2.work), gate.shared(h3.work)];
    await settle();
    assert.deepEqual(log, ['start s1', 'start s2', 'start s3']);
    h1.release();
    h2.release();
    h3.release();
    assert.deepEqual(await Promise.all(p), ['s1', 's2', 's3']);
  });

  test('exclusive waits for current shared holders to finish', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const s1 = holder(log, 's1');
    const s2 = holder(log, 's2');
    const ps1 = gate.shared(s1.work);
    const ps2 = gate.shared(s2.work);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work);
    await settle();
    assert.deepEqual(log, ['start s1', 'start s2']);

    s1.release();
    await ps1;
    await settle();
    assert.ok(!log.includes('start x'), 'exclusive must not start while a shared holder remains');

    s2.release();
    await ps2;
    await settle();
    assert.equal(log.at(-1), 'start x');
    x.release();
    await px;
  });

  test('a waiting exclusive holder keeps new shared holders out (writer preference)', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const s1 = holder(log, 's1');
    const ps1 = gate.shared(s1.work);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work);
    const late = holder(log, 'late');
    const pLate = gate.shared(late.work);
    await settle();
    assert.deepEqual(log, ['start s1'], 'a shared holder arriving after a waiting exclusive must queue');

    s1.release();
    await ps1;
    await settle();
    assert.deepEqual(log, ['start s1', 'end s1', 'start x']);

    x.release();
    await px;
    await settle();
    assert.deepEqual(log, ['start s1', 'end s1', 'start x', 'end x', 'start late']);
    late.release();
    await pLate;
  });

  test('shared holders queued during an exclusive all resume together once it finishes', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work);
    const r1 = holder(log, 'r1');
    const r2 = holder(log, 'r2');
    const pr = [gate.shared(r1.work), gate.shared(r2.work)];
    await settle();
    assert.deepEqual(log, ['start x']);

    x.release();
    await px;
    await settle();
    assert.deepEqual(log, ['start x', 'end x', 'start r1', 'start r2']);
    r1.release();
    r2.release();
    assert.deepEqual(await Promise.all(pr), ['r1', 'r2']);

    // And the gate is open again afterwards.
    assert.equal(await gate.shared(async () => 'open'), 'open');
  });

  test('two exclusive holders never overlap', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const x1 = holder(log, 'x1');
    const x2 = holder(log, 'x2');
    const p1 = gate.exclusive(x1.work);
    const p2 = gate.exclusive(x2.work);
    await settle();
    assert.deepEqual(log, ['start x1']);
    x1.release();
    await p1;
    await settle();
    assert.deepEqual(log, ['start x1', 'end x1', 'start x2']);
    x2.release();
    await p2;
  });

  test('an exclusive holder that throws releases the gate for waiting shared holders', async () => {
    const gate = new Gate();
    const fail = deferred();
    const px = gate.exclusive(() => fail.promise);
    const ps = gate.shared(async () => 'after');
    fail.reject(new Error('gc failed'));
    await assert.rejects(px, /gc failed/);
    assert.equal(await ps, 'after');
  });
  test('an exclusive holder woken from the queue keeps out shared holders arriving while it works', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const s1 = holder(log, 's1');
    const ps1 = gate.shared(s1.work);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work);
    s1.release();
    await ps1;
    await settle();
    assert.equal(log.at(-1), 'start x');
    const s2 = holder(log, 's2');
    const ps2 = gate.shared(s2.work);
    await settle();
    assert.equal(log.at(-1), 'start x', 'a shared holder must not run alongside the exclusive one');
    x.release();
    await px;
    await settle();
    assert.equal(log.at(-1), 'start s2');
    s2.release();
    await ps2;
  });

  test('shared holders resumed after an exclusive one hold the gate: the next exclusive waits for them', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const x1 = holder(log, 'x1');
    const px1 = gate.exclusive(x1.work);
    const r1 = holder(log, 'r1');
    const r2 = holder(log, 'r2');
    const pr = [gate.shared(r1.work), gate.shared(r2.work)];
    await settle();
    x1.release();
    await px1;
    await settle();
    assert.deepEqual(log, ['start x1', 'end x1', 'start r1', 'start r2']);
    const x2 = holder(log, 'x2');
    const px2 = gate.exclusive(x2.work);
    await settle();
    assert.equal(log.at(-1), 'start r2', 'x2 waits for the resumed shared holders');
    r1.release();
    await pr[0];
    await settle();
    assert.ok(!log.includes('start x2'), 'one shared holder is still inside');
    r2.release();
    await pr[1];
    await settle();
    assert.equal(log.at(-1), 'start x2');
    x2.release();
    await px2;
  });
  test('past its preference a waiting exclusive holder lets shared holders pass, and runs once nothing holds the gate', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const hung = holder(log, 'hung');
    const pHung = gate.shared(hung.work);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work, 30);
    const kept = holder(log, 'kept');
    const pKept = gate.shared(kept.work);
    await settle();
    assert.deepEqual(log, ['start hung'], 'kept out while the exclusive one is preferred');
    await new Promise((r) => setTimeout(r, 60));
    assert.deepEqual(log, ['start hung', 'start kept'], 'let in beside the holder that outlasted the preference');
    const later = holder(log, 'later');
    const pLater = gate.shared(later.work);
    await settle();
    assert.equal(log.at(-1), 'start later', 'a later shared holder passes the waiting exclusive one too');
    hung.release();
    kept.release();
    await Promise.all([pHung, pKept]);
    await settle();
    assert.ok(!log.includes('start x'), 'not while one shared holder is inside');
    later.release();
    await pLater;
    await settle();
    assert.equal(log.at(-1), 'start x', 'it ran at the first moment nothing held the gate');
    const after = holder(log, 'after');
    const pAfter = gate.shared(after.work);
    await settle();
    assert.equal(log.at(-1), 'start x', 'and alone');
    x.release();
    await px;
    await settle();
    assert.equal(log.at(-1), 'start after');
    after.release();
    await pAfter;
  });

  test('an exclusive holder admitted within its preference is not disturbed when the preference would have ended', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const s1 = holder(log, 's1');
    const ps1 = gate.shared(s1.work);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work, 40);
    const x2 = holder(log, 'x2');
    const px2 = gate.exclusive(x2.work); // queued behind x, preferred
    s1.release();
    await ps1;
    await settle();
    assert.equal(log.at(-1), 'start x');
    await new Promise((r) => setTimeout(r, 60)); // past x's preference, x still inside
    const s2 = holder(log, 's2');
    const ps2 = gate.shared(s2.work);
    await settle();
    assert.equal(log.at(-1), 'start x', 'still alone: its ended preference moved nothing');
    x.release();
    await px;
    await settle();
    assert.equal(log.at(-1), 'start x2', 'the writer queued behind it next, before the shared one');
    x2.release();
    await px2;
    await settle();
    assert.equal(log.at(-1), 'start s2');
    s2.release();
    await ps2;
  });

  test('one of two waiting exclusive holders losing its preference leaves shared holders behind the other', async () => {
    const gate = new Gate();
    const log: string[] = [];
    const hung = holder(log, 'hung');
    const pHung = gate.shared(hung.work);
    const patient = holder(log, 'patient');
    const pPatient = gate.exclusive(patient.work, 20);
    const x = holder(log, 'x');
    const px = gate.exclusive(x.work);
    const late = holder(log, 'late');
    const pLate = gate.shared(late.work);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(log, ['start hung'], 'the preferred writer still keeps the shared one out');
    hung.release();
    await pHung;
    await settle();
    assert.equal(log.at(-1), 'start x', 'the preferred writer first');
    x.release();
    await px;
    await settle();
    assert.equal(log.at(-1), 'start patient', 'then the one that lost its preference, the gate being free');
    patient.release();
    await pPatient;
    await settle();
    assert.equal(log.at(-1), 'start late');
    late.release();
    await pLate;
  });
});
