// DEL: a DEL joins an identical one queued or in flight, repeats of a finished teardown are answered
// from a tombstone without touching the queue or SQLite, a known attachment is torn down by the
// teardown rules, and an unknown one gets one best-effort pass-through DEL. An ADD queued for the
// same attachment invalidates both, so a DEL that races a new ADD always waits for it. A journaled
// teardown that outlasts the DEL's answer budget is answered then and goes on.
// One concern: how a DEL is answered and when; the teardown it waits for is teardown.ts's.

import {
  CniError,
  ErrorCode,
  clip,
  failureSafeText,
  podFromCniArgs,
  podLogFields,
  type CniEnv,
  type PluginConf,
} from '@cni-steward/shared';
import { attachmentLogFields, type AttachmentKey } from '../store/types.js';
import { delAnswerBudgetMs } from './answer-budget.js';
import { attachmentRow } from './attachment-row.js';
import { keyString, type EngineContext } from './context.js';
import { Priority, type PriorityValue } from './limiter.js';
import { parseStewardConf, pluginStdin, type Delegate, type StewardConf } from './netconf.js';
import { netnsIdentity, teardownNetns } from './netns.js';
import { anyHeldInterfaces, keyedHeld, type Holder, type KeyedHolder } from './interface-holders.js';
import { pluginCall, requestTarget } from '../plugins/call.js';
import type { Logger } from 'pino';

/** A bounded set that forgets its oldest entries first. */
class RecentKeys {
  private readonly keys = new Set<string>();
  constructor(private readonly max: number) {}

  has(k: string): boolean {
    return this.keys.has(k);
  }

  add(k: string): void {
    this.keys.delete(k);
    this.keys.add(k);
    if (this.keys.size > this.max) this.keys.delete(this.keys.values().next().value as string);
  }

  delete(k: string): void {
    this.keys.delete(k);
  }
}

/** How far one DEL has got, for its answer budget (Dels.answerEarly). */
interface DelProgress {
  /** Its turn in the container's queue came. */
  begun: boolean;
  /** An ADD of its key was queued before it. */
  addAhead: boolean;
  /** Its attachment is unknown: the one best-effort pass-through DEL runs. */
  passingThrough: boolean;
}

/** What a DEL's log lines name: its attachment and pod. */
function delLogFields(env: CniEnv, key: AttachmentKey) {
  return {
    containerId: key.containerId,
    ...podLogFields(podFromCniArgs(env.args)),
    network: key.network,
    ifname: key.ifname,
  };
}

/** A DEL queued or running, which identical DELs join. */
interface InFlightDel {
  answer: Promise<string>;
  progress: DelProgress;
  /** The answer with a runtime DEL's budget: `answer` for a runtime's DEL, set by runtimeAnswer for a spooled one. */
  budgeted?: Promise<string>;
}

export class Dels {
  private readonly inFlight = new Map<string, InFlightDel>();
  /**
   * Keys whose attachment is torn down. Repeated DELs (a runtime's retry storm) are answered from
   * here without touching the queue or SQLite; a key leaves the set as soon as an ADD for it is
   * queued, so a DEL racing a new ADD still waits for it. Bounded; the database is the fallback.
   */
  private readonly tombstones = new RecentKeys(20_000);
  /** ADDs queued or running per key: while any is, a finishing DEL must not record a tombstone. */
  private readonly addsPending = new Map<string, number>();

  constructor(private readonly ctx: EngineContext) {}

  /** Called when an ADD for `key` is queued; the returned function when it settles. */
  addQueued(key: AttachmentKey): () => void {
    const k = keyString(key);
    // A DEL arriving after this ADD must wait for it: neither a tombstone nor an earlier DEL may answer it.
    this.tombstones.delete(k);
    this.inFlight.delete(k);
    this.addsPending.set(k, (this.addsPending.get(k) ?? 0) + 1);
    return () => {
      const n = (this.addsPending.get(k) ?? 1) - 1;
      if (n > 0) this.addsPending.set(k, n);
      else this.addsPending.delete(k);
    };
  }

  isTombstoned(key: AttachmentKey): boolean {
    return this.tombstones.has(keyString(key));
  }

  /** The key has teardown work again (an abandoned step re-armed): DELs must reach the journal. */
  forgetTombstone(key: AttachmentKey): void {
    this.tombstones.delete(keyString(key));
  }

  /**
   * Whether a DEL of this request that failed leaves nothing for its spool file to remember: its
   * netconf names no network (nothing can be held for it; such a DEL does not fail, see nameless),
   * or its attachment's teardown is in the journal (`deleting`: the retry scheduler owns it;
   * `deleted`). Otherwise it failed before its teardown reached the journal (a full disk, a journal
   * that cannot be written or read) and only the file remembers it. Throws what the store throws.
   */
  journaled(env: CniEnv, config: Record<string, unknown>): boolean {
    const network = typeof config.name === 'string' ? config.name : '';
    if (network === '') return true;
    const state = this.ctx.store.currentAttachment({
      containerId: env.containerId,
      network,
      ifname: env.ifname,
    })?.state;
    return state === 'deleting' || state === 'deleted';
  }

  /** `priority`: Del for a runtime's DEL, Background for a spooled one (spool.ts drains behind ADDs). */
  del(env: CniEnv, config: Record<string, unknown>, priority: PriorityValue = Priority.Del): Promise<string> {
    const { ctx } = this;
    // DEL must succeed for as much input as possible (a stuck DEL blocks the sandbox forever):
    // only the network name is needed to find the attachment; the stored config does the rest.
    const network = typeof config.name === 'string' ? config.name : '';
    if (network === '') return this.nameless(env);
    const key = { containerId: env.containerId, network, ifname: env.ifname };
    const k = keyString(key);
    const coalesced = this.coalesced(env, config, key, priority);
    if (coalesced) return coalesced;
    // The answer settles as soon as the teardown is done; the container's queue is held until the
    // final commit (deferred past the answer, see answerBeforeFinalCommit) is on disk too, and
    // identical DELs arriving in between join the answer rather than run again.
    let answered!: (text: string) => void;
    let failed!: (e: unknown) => void;
    const answer = new Promise<string>((resolve, reject) => {
      answered = resolve;
      failed = reject;
    });
    // An ADD of this key queued ahead of this DEL: until this DEL runs, the key's row is that ADD's
    // business (or an older attachment's), not this DEL's.
    const progress: DelProgress = { begun: false, addAhead: this.addsPending.has(k), passingThrough: false };
    const work = ctx.serialize(env.containerId, async () => {
      progress.begun = true;
      const { text, commit } = await this.delLocked(env, config, key, priority, progress);
      answered(text);
      if (commit) {
        // After this turn's microtasks, in which the HTTP layer writes the answer.
        await new Promise((r) => setImmediate(r));
        this.finalCommit(key, commit);
      }
    });
    work.catch(failed);
    const entry: InFlightDel = { answer, progress };
    this.inFlight.set(k, entry);
    // A runtime's DEL only: a spooled one (Background) has no shim waiting, and its file goes once
    // it is answered, so an early answer would only drop the file before its teardown is on disk.
    if (priority === Priority.Del) {
      this.armBudget(answer, config.timeouts, () => this.answerEarly(env, config, key, progress, answered, failed));
      entry.budgeted = answer;
    }
    const forget = () => {
      if (this.inFlight.get(k) === entry) this.inFlight.delete(k);
    };
    work.then(forget, forget);
    return answer;
  }

  /** The answer of a DEL that needs no teardown of its own: a tombstone's, or that of one in flight it joins. */
  private coalesced(
    env: CniEnv,
    config: Record<string, unknown>,
    key: AttachmentKey,
    priority: PriorityValue,
  ): Promise<string> | undefined {
    const { ctx } = this;
    const k = keyString(key);
    // Log fields only when the DEL is coalesced: a DEL that runs its own teardown parses no CNI_ARGS here.
    if (this.tombstones.has(k)) {
      ctx.metrics.coalescedDels.inc({ how: 'tombstone' });
      ctx.log.debug(delLogFields(env, key), 'DEL answered from a tombstone: already torn down');
      return Promise.resolve('');
    }
    const joined = this.inFlight.get(k);
    if (!joined) return undefined;
    ctx.metrics.coalescedDels.inc({ how: 'joined' });
    ctx.log.debug(delLogFields(env, key), 'DEL joined one queued or in flight');
    return priority === Priority.Del ? this.runtimeAnswer(joined, env, config, key) : joined.answer;
  }

  /**
   * A DEL whose netconf has no network name: nothing of steward's can be keyed without one (an ADD
   * without one is refused, 7), so there is nothing to tear down, and a DEL refused would pin the
   * sandbox, retried forever. Answered with success, and warned about once.
   */
  private nameless(env: CniEnv): Promise<string> {
    this.ctx.warn(
      'del-without-name',
      'a DEL whose netconf has no network "name" was answered with success and ran nothing: an ADD without one is refused (7), so nothing can be held for it',
      { containerId: env.containerId },
    );
    return Promise.resolve('');
  }

  /**
   * What a runtime's DEL that joins `f` waits for. Joining a spooled DEL (no budget: no shim waits
   * for it), it would wait out a hanging delegate to the shim's bound and be spooled a second time.
   * So the first runtime DEL to join gets a runtime DEL's budget on an answer of its own, which later
   * joiners share, and at that budget it is answered as a DEL whose teardown failed is (defer:
   * success; strict: 105) while the spooled DEL goes on: that DEL is on disk already, its spool file
   * kept until its teardown is journaled (spool-run.ts), whether it still waits for its turn or not.
   */
  private runtimeAnswer(f: InFlightDel, env: CniEnv, config: Record<string, unknown>, key: AttachmentKey) {
    if (f.budgeted) return f.budgeted;
    const { ctx } = this;
    let answered!: (text: string) => void;
    let failed!: (e: unknown) => void;
    const own = new Promise<string>((resolve, reject) => {
      answered = resolve;
      failed = reject;
    });
    f.answer.then(answered, failed);
    this.armBudget(own, config.timeouts, () => {
      ctx.log.warn(
        { ...delLogFields(env, key), policy: ctx.delPolicy },
        'DEL joining a spooled DEL answered at its budget; the spooled DEL, on disk, goes on',
      );
      this.answerPending(answered, failed, 'a spooled DEL of this attachment is still running');
    });
    f.budgeted = own;
    return own;
  }

  /**
   * Arms a DEL's answer budget (delAnswerBudgetMs of its netconf's `timeouts`): `onExpiry` runs when
   * it passes with `answer` still unsettled; its timer goes as soon as `answer` settles. Answered
   * already (its final commit still owed): nothing to answer early.
   */
  private armBudget(answer: Promise<string>, timeouts: unknown, onExpiry: () => void): void {
    let settled = false;
    const budget = setTimeout(() => {
      if (!settled) onExpiry();
    }, delAnswerBudgetMs(timeouts));
    budget.unref();
    const settle = () => {
      settled = true;
      clearTimeout(budget);
    };
    answer.then(settle, settle);
  }

  /** A DEL answered while its teardown goes on, as one whose teardown failed is: defer, success; strict, 105. */
  private answerPending(answered: (text: string) => void, failed: (e: unknown) => void, stillRunning: string): void {
    if (this.ctx.delPolicy === 'strict')
      failed(new CniError(ErrorCode.TeardownPending, `${stillRunning}; it goes on in the background`));
    else answered('');
  }

  /**
   * The DEL's answer budget passed with its teardown still running (a delegate's DEL hangs until
   * --plugin-timeout). Left to the shim's bound, the DEL would be spooled, and the runtime's next DEL
   * (RemovePodSandbox after StopPodSandbox) would join this one and wait out the bound again: a minute
   * a pod. So it is answered now, as one whose teardown failed is (defer: success, the journal and the
   * retry scheduler own the rest; strict: 105), and the teardown goes on; DELs joining it get the same
   * answer at once. Only once its teardown is journaled (`deleting`), and, when an ADD of its key was
   * queued before it, only once it runs: before, the row is that ADD's or an older one's, so nothing of
   * this DEL is on disk; the shim's bound spools it. A pass-through DEL (an attachment steward never
   * added) is best effort and owes nothing: answered at its budget too.
   */
  private answerEarly(
    env: CniEnv,
    config: Record<string, unknown>,
    key: AttachmentKey,
    progress: DelProgress,
    answered: (text: string) => void,
    failed: (e: unknown) => void,
  ): void {
    const { ctx } = this;
    if (progress.passingThrough) {
      // Best effort, once, for an attachment steward never added: nothing is owed, whatever it answers.
      ctx.log.warn(
        { containerId: key.containerId, network: key.network, ifname: key.ifname },
        'DEL for an attachment steward never added answered before its pass-through DEL finished (its answer budget passed)',
      );
      return answered('');
    }
    // Behind an ADD of its key, the row it would read is not this DEL's: only once it runs.
    if (progress.addAhead && !progress.begun) return;
    try {
      if (!this.journaled(env, config)) return;
    } catch {
      return; // the journal cannot be read: the shim's bound spools the DEL
    }
    ctx.log.warn(
      { containerId: key.containerId, network: key.network, ifname: key.ifname, policy: ctx.delPolicy },
      'DEL answered before its teardown finished (its answer budget passed); the teardown goes on, and the retry scheduler owns what fails',
    );
    this.answerPending(answered, failed, 'teardown is still running');
  }

  /** The final commit of a DEL already answered; a failure leaves the step `deleting`, which the scheduler reclaims. */
  private finalCommit(key: AttachmentKey, commit: () => void): void {
    try {
      commit();
      this.rememberTombstone(key);
    } catch (e) {
      this.ctx.log.error(
        { containerId: key.containerId, network: key.network, ifname: key.ifname, err: (e as Error).message },
        'DEL answered, but its final journal write failed; the last step stays `deleting` and is torn down again by the retry scheduler',
      );
    }
  }

  private async delLocked(
    env: CniEnv,
    config: Record<string, unknown>,
    key: AttachmentKey,
    priority: PriorityValue,
    progress: DelProgress,
  ): Promise<{ text: string; commit?: () => void }> {
    const { ctx } = this;
    const a = ctx.store.currentAttachment(key);
    if (!a) {
      progress.passingThrough = true;
      await this.passThrough(env, config, key, priority);
      this.rememberTombstone(key);
      return { text: '' };
    }
    const fields = attachmentLogFields(a);
    if (a.state === 'deleted') {
      this.rememberTombstone(key);
      ctx.metrics.coalescedDels.inc({ how: 'tombstone' });
      ctx.log.info(fields, 'DEL of an attachment already torn down (rolled back, or DELed before)');
      return { text: '' };
    }
    // The first DEL runs at once. Once a teardown is failing, repeated DELs do not re-run the
    // failing plugin (that is how a DEL storm becomes an outage); the retry schedule owns it.
    const outcome = await ctx.teardown.run(a.id, priority, {
      force: a.state !== 'deleting',
      deferFinalCommit: ctx.answerBeforeFinalCommit,
    });
    if (outcome.commit) return { text: '', commit: outcome.commit };
    if (outcome.done) this.rememberTombstone(key);
    else
      ctx.log.info(
        { ...fields, err: outcome.error?.message },
        `DEL: teardown not finished; the retry scheduler owns it (policy ${ctx.delPolicy})`,
      );
    if (!outcome.done && ctx.delPolicy === 'strict') {
      const err = outcome.error ?? new CniError(ErrorCode.TeardownPending, 'teardown is incomplete');
      // Runtimes read "not found" in a DEL error as success: keep a failure a failure.
      throw new CniError(err.code, failureSafeText(err.message), err.details && failureSafeText(err.details));
    }
    return { text: '' };
  }

  private rememberTombstone(key: AttachmentKey): void {
    const k = keyString(key);
    if (!this.addsPending.has(k)) this.tombstones.add(k);
  }

  /**
   * DEL for an attachment we never saw (installed on a busy node, or ADD went elsewhere): one
   * best-effort DEL through the request's delegates, errors logged and not returned, then a
   * tombstone so repeats return at once without running anything.
   */
  private async passThrough(
    env: CniEnv,
    config: Record<string, unknown>,
    key: AttachmentKey,
    priority: PriorityValue,
  ): Promise<void> {
    const { ctx } = this;
    const pod = podFromCniArgs(env.args);
    const log = ctx.log.child({
      containerId: key.containerId,
      ...podLogFields(pod),
      network: key.network,
      ifname: key.ifname,
    });
    let conf: StewardConf | undefined;
    try {
      conf = parseStewardConf(config, env.ifname);
    } catch (e) {
      log.warn({ err: (e as Error).message }, 'DEL for an unknown attachment with an unusable netconf; nothing to run');
    }
    if (conf) await this.passThroughChains(env, conf, key, priority, log);
    // Relaxed: the DEL has run; a tombstone lost with the kernel only means a repeat passes through
    // again. So is one that cannot be written (a full disk): the DEL is answered done, since it was,
    // and a spooled one's file goes (kept, every pass would run the plugins' DELs again).
    try {
      ctx.store.relaxed(() =>
        ctx.store.createAttachment(
          attachmentRow(
            ctx.bootId,
            env,
            key,
            typeof config.cniVersion === 'string' ? config.cniVersion : '',
            JSON.stringify(config),
            pod,
          ),
          'deleted',
        ),
      );
      log.info('DEL for an attachment steward never added: passed through once, tombstone written');
    } catch (e) {
      log.warn(
        { err: (e as Error).message },
        'DEL for an attachment steward never added: passed through once; its tombstone could not be written',
      );
    }
  }

  /** The request's delegates, last first, each plugin's DEL once; a failure is logged, never returned. */
  private async passThroughChains(
    env: CniEnv,
    conf: StewardConf,
    key: AttachmentKey,
    priority: PriorityValue,
    log: Logger,
  ): Promise<void> {
    // The request's netns only while it is one other than the host's: a plugin's DEL there would
    // remove the host's own interface of the pod's name.
    const netns = await teardownNetns(env.netns, this.ctx.hostNetns);
    if (netns !== env.netns)
      log.info(
        { netns: clip(env.netns, 200) },
        "the DEL's CNI_NETNS is gone, or no pod's network namespace: passed through without one",
      );
    // Nor, for a delegate, where an attachment steward holds has that delegate's interface: its DEL
    // would remove that one's.
    const held =
      netns === ''
        ? new Map<string, Holder>()
        : anyHeldInterfaces(this.ctx.store, key, { netns, identity: netnsIdentity(netns), bootId: this.ctx.bootId });
    // Nor a plugin's whose state another attachment of the container holds under the same key.
    const keyed = keyedHeld(this.ctx.store, key, conf);
    env = { ...env, netns };
    for (const d of [...conf.delegates].reverse()) {
      const where = delegateNetns(held.get(d.ifname), d, env, log);
      if (where === null) continue;
      const target = requestTarget({ ...env, netns: where }, d.ifname);
      for (const plugin of [...d.plugins].reverse()) {
        if (skipsPlugin(d, plugin, keyed, log)) continue;
        try {
          const stdin = pluginStdin(d, plugin, conf.runtimeConfig);
          await this.ctx.slots.run(priority, pluginCall('DEL', plugin.type, stdin, target));
          await this.ctx.teardown.masqueradeLeft({
            containerId: env.containerId,
            stdin,
            netns: target.netns ?? '',
            priority,
          });
        } catch (e) {
          log.warn(
            { plugin: plugin.type, err: (e as Error).message },
            'pass-through DEL failed; ignored, since this attachment was never added through steward',
          );
        }
      }
    }
  }
}

/** A plugin a pass-through DEL does not run; logged. */
function skipsPlugin(d: Delegate, plugin: PluginConf, keyed: Map<string, KeyedHolder>, log: Logger): boolean {
  const holder = keyed.get(`${d.name} ${plugin.type}`);
  if (holder?.holds) {
    log.warn(
      {
        plugin: plugin.type,
        delegate: d.name,
        holderNetwork: holder.attachment.network,
        holderIfname: holder.attachment.ifname,
      },
      "pass-through DEL skips a plugin that keys its state by container and network: another of the container's attachments holds it",
    );
    return true;
  }
  // A delegate that is steward itself would send this DEL to this daemon again, where it waits
  // behind this one until its bound (ADD refuses such a netconf: netconf.ts parseServedConf).
  if (plugin.type === 'steward') {
    log.warn({ plugin: plugin.type }, 'pass-through DEL skips a delegate that is steward itself');
    return true;
  }
  return false;
}

/**
 * Where a delegate's pass-through DEL runs: in the request's netns unless an attachment steward holds
 * the delegate's interface there; then without it (its DEL would remove that one's), or not at all
 * when that holder is the same container's, of the same delegate (its network added again at
 * another CNI_IFNAME): IPAM keys an address by container, ifname and network, so even without the
 * netns the DEL would free the holder's. null: not run.
 */
function delegateNetns(holder: Holder | undefined, d: Delegate, env: CniEnv, log: Logger): string | null {
  if (holder === undefined) return env.netns;
  const fields = {
    netns: clip(env.netns, 200),
    ifname: d.ifname,
    holder: holder.containerId,
    holderNetwork: holder.network,
  };
  if (holder.containerId === env.containerId && holder.delegateName === d.name) {
    log.warn(
      { ...fields, delegate: d.name },
      "a delegate's interface in CNI_NETNS is the same container's, of the same delegate: its DEL is not passed through (it would free that one's address)",
    );
    return null;
  }
  log.warn(
    fields,
    "a delegate's interface in CNI_NETNS is another attachment's: its DEL is passed through without CNI_NETNS",
  );
  return '';
}
