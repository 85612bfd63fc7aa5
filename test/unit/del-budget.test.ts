// A DEL's answer budget (engine/del.ts answerEarly, engine/answer-budget.ts): a DEL whose own
// teardown runs past the budget is answered then, as one whose teardown failed is, and the teardown
// goes on; a DEL still queued is never answered early (nothing of it is on disk yet: the shim's bound
// spools it). Root-free: in-memory store, fake plugins; the integration case with the real shim is
// test/integration/del-budget.test.ts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cni-steward/shared';
import { conf, deferred, req, setup } from '../helpers/engine-fakes.js';

/** timeouts.del 40 ms: a budget of 30 ms (a quarter less). */
const chain = { ...conf([{ type: 'one' }]), timeouts: { del: 40 } };
const key = (containerId: string, ifname = 'eth0') => ({ containerId, network: 'net', ifname });

/** The fake 'one' plugin, whose DELs wait for `held` while `hold()` says so. */
function holding(s: ReturnType<typeof setup>, hold: (ifname: string) => boolean) {
  const held = deferred();
  s.plugins.on('one', (call) => {
    if (call.command === 'ADD') return { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
    return call.command === 'DEL' && hold(call.ifname) ? held.promise : undefined;
  });
  return held;
}

/** The answer, or 'unanswered' after a second (many budgets), so a missing early answer fails instead of hanging. */
const within = (p: Promise<string>) =>
  Promise.race([p, new Promise<string>((r) => setTimeout(() => r('unanswered'), 1000))]);

const pending = <T>(p: Promise<T>) => {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  return () => !done;
};

describe("a DEL's answer budget", () => {
  test('defer: a hanging teardown is answered success at its budget, a joining DEL at once; the teardown goes on', async () => {
    const s = setup();
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    assert.equal(await s.engine.handle(req('DEL', 'x', chain)), '');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleting', 'answered while its DEL still runs');
    assert.equal(await s.engine.handle(req('DEL', 'x', chain)), '', 'the next DEL joins the answer');
    assert.equal(s.plugins.of('DEL').length, 1);
    held.resolve();
    await s.engine.idle('x');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
  });

  test('strict: the same DEL is answered 105, still running', async () => {
    const s = setup({ delPolicy: 'strict' });
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    await assert.rejects(s.engine.handle(req('DEL', 'x', chain)), (e: CniError) => {
      assert.equal(e.code, 105);
      assert.match(e.message, /still running/);
      return true;
    });
    held.resolve();
    await s.engine.idle('x');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
  });

  test('a DEL queued behind an ADD of its key is not answered early, although the row it would read says deleted', async () => {
    const s = setup();
    const held = holding(s, (ifname) => ifname === 'eth1');
    await s.engine.handle(req('ADD', 'x', chain));
    await s.engine.handle(req('DEL', 'x', chain));
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
    await s.engine.handle(req('ADD', 'x', chain, { ifname: 'eth1' }));
    const hung = s.engine.handle(req('DEL', 'x', chain, { ifname: 'eth1' })); // holds x's queue
    const again = s.engine.handle(req('ADD', 'x', chain)); // its requester still waits
    const del = s.engine.handle(req('DEL', 'x', chain));
    const unanswered = pending(del);
    await new Promise((r) => setTimeout(r, 150)); // five budgets
    assert.ok(unanswered(), 'answered before its own teardown (or even its ADD) ran');
    held.resolve();
    await Promise.all([hung, again]);
    assert.equal(await del, '');
    const attachments = s.store.listAttachments({ containerId: 'x' }).filter((a) => a.ifname === 'eth0');
    assert.deepEqual(
      attachments.map((a) => a.state),
      ['deleted', 'deleted'],
      'the ADD ran, then the DEL tore it down',
    );
  });

  test('a DEL queued behind other work of its container (no ADD of its key ahead) whose row is deleting is answered at its budget', async () => {
    const s = setup();
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    await s.engine.handle(req('ADD', 'x', chain, { ifname: 'eth1' }));
    const first = s.engine.handle(req('DEL', 'x', chain, { ifname: 'eth1' })); // holds x's queue
    assert.equal(await first, '');
    // The eth0 row goes deleting as a recovery or retry teardown would leave it: owned by the journal.
    s.store.setAttachmentState(s.store.currentAttachment(key('x'))!.id, 'deleting');
    const queued = s.engine.handle(req('DEL', 'x', chain));
    assert.equal(await within(queued), '', 'answered while still queued: its teardown is on disk');
    held.resolve();
    await s.engine.idle('x');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
  });

  test('a pass-through DEL (an attachment steward never added) whose plugin hangs is answered at its budget', async () => {
    const s = setup();
    const held = holding(s, () => true);
    assert.equal(await within(s.engine.handle(req('DEL', 'never-added', chain))), '');
    assert.equal(s.plugins.of('DEL').length, 1, 'its one best-effort DEL still runs');
    held.resolve();
    await s.engine.idle('never-added');
    assert.equal(
      s.store.currentAttachment(key('never-added'))!.state,
      'deleted',
      'its tombstone, once the DEL is done',
    );
  });

  test('a spooled DEL (no shim waits for it; its file goes once it is answered) is never answered early', async () => {
    const s = setup();
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    const spooled = s.engine.spooledDel(req('DEL', 'x', chain));
    assert.equal(await within(spooled), 'unanswered', 'answered while its teardown still ran');
    held.resolve();
    assert.equal(await spooled, '');
  });

  test('a runtime DEL joining a spooled one is answered at its budget, as later joiners are; the spooled DEL still waits for its teardown', async () => {
    const s = setup();
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    const spooled = s.engine.spooledDel(req('DEL', 'x', chain));
    await new Promise((r) => setTimeout(r, 10)); // its teardown under way, journaled deleting
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleting');
    const runtime = s.engine.handle(req('DEL', 'x', chain));
    assert.equal(await within(runtime), '', 'the runtime DEL waited for the spooled teardown');
    assert.equal(await within(s.engine.handle(req('DEL', 'x', chain))), '', 'a later joiner waited');
    assert.equal(await within(spooled), 'unanswered', 'the spooled DEL was answered while its teardown ran');
    assert.equal(s.plugins.of('DEL').length, 1, 'the joiners ran no DEL of their own');
    held.resolve();
    assert.equal(await spooled, '');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
  });

  test('runtime DELs joining a spooled DEL still queued (its row added, behind a hanging DEL of its container) are answered at one budget: its spool file records it', async () => {
    const s = setup();
    const held = holding(s, (ifname) => ifname === 'eth1');
    await s.engine.handle(req('ADD', 'x', chain));
    await s.engine.handle(req('ADD', 'x', chain, { ifname: 'eth1' }));
    const first = s.engine.spooledDel(req('DEL', 'x', chain, { ifname: 'eth1' })); // hangs, holding x's queue
    const queued = s.engine.spooledDel(req('DEL', 'x', chain));
    const joiners = [s.engine.handle(req('DEL', 'x', chain)), s.engine.handle(req('DEL', 'x', chain))];
    assert.deepEqual(await Promise.all(joiners.map(within)), ['', ''], 'the runtime DELs waited for the queue');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'added', 'answered while the spooled DEL still waits');
    assert.equal(await within(queued), 'unanswered', 'the spooled DEL itself is not answered early');
    held.resolve();
    assert.deepEqual(await Promise.all([first, queued]), ['', '']);
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
    assert.equal(s.plugins.of('DEL').length, 2, 'one delegate DEL an interface: the joiners ran none');
  });

  test('strict: a runtime DEL joining a spooled one whose teardown hangs is answered 105 at its budget', async () => {
    const s = setup({ delPolicy: 'strict' });
    const held = holding(s, () => true);
    await s.engine.handle(req('ADD', 'x', chain));
    const spooled = s.engine.spooledDel(req('DEL', 'x', chain));
    await new Promise((r) => setTimeout(r, 10));
    const code = s.engine.handle(req('DEL', 'x', chain)).then(
      () => 'success',
      (e: CniError) => String(e.code),
    );
    assert.equal(await within(code), '105');
    held.resolve();
    assert.equal(await spooled, '');
  });

  test('a DEL queued behind other work of its container whose attachment is still added (nothing of it on disk) is not answered early', async () => {
    const s = setup();
    const held = holding(s, (ifname) => ifname === 'eth1');
    await s.engine.handle(req('ADD', 'x', chain));
    await s.engine.handle(req('ADD', 'x', chain, { ifname: 'eth1' }));
    assert.equal(await s.engine.handle(req('DEL', 'x', chain, { ifname: 'eth1' })), ''); // holds x's queue
    const queued = s.engine.handle(req('DEL', 'x', chain));
    assert.equal(await within(queued), 'unanswered', 'answered with its attachment still added');
    held.resolve();
    assert.equal(await queued, '');
    assert.equal(s.store.currentAttachment(key('x'))!.state, 'deleted');
  });
});
