// Orchestration of the CNI commands. Nothing here knows HTTP or SQL: requests come in as
// CniRequestBody, state goes through the Store, plugins through the PluginRunner.
//
// ADD, DEL and CHECK for one container are serialised FIFO (KeyedQueue); different containers run
// in parallel, bounded by the Limiter's plugin slots. Every step is journaled before it runs.

import type { Logger } from 'pino';
import {
  CniError,
  ErrorCode,
  convertResult,
  failureSafeText,
  podFromCniArgs,
  podLogFields,
  versionAtLeast,
  type CniEnv,
  type CniRequestBody,
  type CniResult,
  type PluginConf,
} from '@cni-steward/shared';
import type { PluginRunner } from '../plugins/executor.js';
import type { Store } from '../store/store.js';
import { podOf, type Attachment, type AttachmentKey, type NewStep, type Step } from '../store/types.js';
import type { Metrics } from '../metrics.js';
import { Gate } from './gate.js';
import { KeyedQueue } from './keyed-queue.js';
import { Limiter, Priority, type PriorityValue } from './limiter.js';
import { parseStewardConf, pluginStdin, type Delegate, type StewardConf } from './netconf.js';
import { Teardown, finalResults, type RetryPolicy, type TeardownOptions, type TeardownOutcome } from './teardown.js';
import { runGc, runStatus, StatusCache } from './gc-status.js';
import { netnsProblem } from './netns.js';
import { checkVersionFor } from './check-version.js';

export type DelPolicy = 'defer' | 'strict';

export interface EngineOptions {
  store: Store;
  run: PluginRunner;
  /** Resolves a plugin type to its executable, throwing a CniError when there is none. */
  locate: (type: string, cniPath: string) => string;
  log: Logger;
  metrics: Metrics;
  bootId: string;
  maxParallel: number;
  delPolicy: DelPolicy;
  retry: RetryPolicy;
  now?: () => number;
}

function keyString(k: AttachmentKey): string {
  return JSON.stringify([k.containerId, k.network, k.ifname]);
}

export class Engine {
  readonly store: Store;
  readonly limiter: Limiter;
  readonly teardown: Teardown;
  readonly gate = new Gate();
  private readonly opts: EngineOptions;
  private readonly queue = new KeyedQueue();
  private readonly dels = new Map<string, Promise<string>>();
  /**
   * Keys whose attachment is torn down. Repeated DELs (a runtime's retry storm) are answered from
   * here without touching the queue or SQLite; a key leaves the set as soon as an ADD for it is
   * queued, so a DEL racing a new ADD still waits for it. Bounded; the database is the fallback.
   */
  private readonly tombstones = new RecentKeys(20_000);
  /** Attachments whose ADD chain (or its rollback) is running: `adding` in the journal, not cut off. */
  private readonly adding = new Set<number>();
  /** ADDs queued or running per key: while any is, a finishing DEL must not record a tombstone. */
  private readonly addsPending = new Map<string, number>();
  private readonly statusCache = new StatusCache();
  private readonly log: Logger;
  /** Netconf problems an operator must fix, keyed so each is logged once (shown in /v1/status). */
  private readonly warnings = new Map<string, string>();

  constructor(opts: EngineOptions) {
    this.opts = opts;
    this.store = opts.store;
    this.log = opts.log;
    this.limiter = new Limiter(opts.maxParallel);
    this.teardown = new Teardown({
      store: opts.store, run: opts.run, limiter: this.limiter, log: opts.log, retry: opts.retry, metrics: opts.metrics,
      ...(opts.now ? { now: opts.now } : {}),
    });
  }

  /** Handles one CNI request; resolves with the text the shim prints, rejects with a CniError. */
  async handle(req: CniRequestBody): Promise<string> {
    const { env, config } = req;
    switch (env.command) {
      case 'ADD': return this.add(env, config);
      case 'DEL': return this.del(env, config);
      case 'CHECK': return this.check(env, config);
      case 'GC': return runGc(this.gcDeps(), env, config);
      case 'STATUS': return runStatus(this.gcDeps(), env, config, this.statusCache);
      case 'VERSION':
        throw new CniError(ErrorCode.InvalidEnv, 'VERSION is answered by the steward shim, not the daemon');
    }
  }

  /**
   * Background teardown of one attachment (retries, recovery, reboot sweep), serialised with the
   * container's runtime requests so the same step is never DELed twice at once.
   */
  runTeardown(attachmentId: number, priority: PriorityValue, opts: TeardownOptions = {}): Promise<TeardownOutcome> {
    const a = this.store.getAttachment(attachmentId);
    if (!a) return Promise.resolve({ done: true });
    return this.queue.run(a.containerId, () => this.gate.shared(() => this.teardown.run(attachmentId, priority, opts)));
  }

  /**
   * Finishes an attachment whose journal was cut off while the daemon kept running (a journal
   * write failed after a plugin ran: disk full): left `adding`, or with a step left `deleting`.
   * Checked again inside the container's queue, where no ADD or DEL of it can be running, so a
   * live request's rows are never mistaken for cut-off ones.
   */
  reclaimUnfinished(attachmentId: number): Promise<TeardownOutcome> {
    const a = this.store.getAttachment(attachmentId);
    if (!a) return Promise.resolve({ done: true });
    return this.queue.run(a.containerId, () => this.gate.shared(async () => {
      const now = this.store.getAttachment(attachmentId);
      const cutOff = now !== undefined && (now.state === 'adding' || this.store.stepsOf(now.id).some((st) => st.state === 'deleting'));
      if (!cutOff) return { done: true };
      this.log.warn({ containerId: now.containerId, network: now.network, ifname: now.ifname, attachment: now.id, state: now.state },
        'reclaiming an attachment whose journal was cut off (a journal write failed); tearing it down');
      return this.teardown.run(attachmentId, Priority.Background, { force: now.state === 'adding' });
    }));
  }

  /** True while a request of this process is working on the attachment (its rows are live, not cut off). */
  isBusy(attachmentId: number): boolean {
    return this.adding.has(attachmentId) || this.teardown.active.has(attachmentId);
  }

  /** Netconf problems seen in requests (capabilities the runtime will never pass, ...). */
  configWarnings(): string[] {
    return [...this.warnings.values()];
  }

  private warnOnce(key: string, text: string, fields: Record<string, unknown>): void {
    if (this.warnings.has(key)) return;
    if (this.warnings.size >= 100) return;
    this.warnings.set(key, text);
    this.log.warn(fields, text);
  }

  private gcDeps() {
    return { store: this.store, run: this.opts.run, limiter: this.limiter, teardown: this.teardown, gate: this.gate, log: this.log };
  }

  // ---- ADD

  private add(env: CniEnv, config: Record<string, unknown>): Promise<string> {
    const conf = parseStewardConf(config, env.ifname);
    const nsWhy = netnsProblem(env.netns);
    if (nsWhy) throw new CniError(ErrorCode.InvalidEnv, nsWhy);
    this.checkCapabilities(conf, config);
    const key = { containerId: env.containerId, network: conf.name, ifname: env.ifname };
    const k = keyString(key);
    // A DEL arriving after this ADD must wait for it: neither a tombstone nor an earlier DEL may answer it.
    this.tombstones.delete(k);
    this.dels.delete(k);
    this.addsPending.set(k, (this.addsPending.get(k) ?? 0) + 1);
    const p = this.queue.run(env.containerId, () => this.gate.shared(() => this.addLocked(env, conf, key)));
    const settle = () => {
      const n = (this.addsPending.get(k) ?? 1) - 1;
      if (n > 0) this.addsPending.set(k, n);
      else this.addsPending.delete(k);
    };
    p.then(settle, settle);
    return p;
  }

  private async addLocked(env: CniEnv, conf: StewardConf, key: AttachmentKey): Promise<string> {
    const { store } = this;
    const configText = JSON.stringify(conf.raw);
    const existing = store.currentAttachment(key);
    if (existing && existing.state === 'added') {
      // A repeated ADD of the very same attachment is answered from the journal; anything else is a conflict.
      if (existing.netns === env.netns && existing.config === configText && existing.result) {
        return convertedResult(existing.result, conf.cniVersion);
      }
      throw new CniError(ErrorCode.AttachmentConflict,
        `container ${key.containerId} already has interface ${key.ifname} on network ${key.network}; DEL it before adding again`);
    }
    if (existing && (existing.state === 'deleting' || existing.state === 'adding')) {
      // `adding` here (inside the container's queue, so no ADD of it is running) is an ADD whose
      // journal was cut off; `deleting` still owes DELs. Adding again now could let a later DEL of
      // the old one release what this ADD allocates (same container and interface), so finish it
      // first: a step that can only fail the same way is abandoned now rather than block this ADD.
      const outcome = await this.teardown.run(existing.id, Priority.Add, { force: true, abandonPermanent: true });
      if (!outcome.done) {
        throw new CniError(ErrorCode.TryAgainLater,
          `an earlier attachment of container ${key.containerId} on ${key.network}/${key.ifname} is still being torn down`,
          outcome.error?.message);
      }
    }

    // Every plugin must exist before anything is journaled or run: a chain that cannot complete
    // should fail without allocating (and then owing a DEL to a plugin that is not there).
    for (const d of conf.delegates) for (const p of d.plugins) this.opts.locate(p.type, env.path);

    const plan = planSteps(conf);
    const pod = podFromCniArgs(env.args);
    // The attachment and its first step are one commit, on disk before the first plugin runs.
    const { a, first } = store.atomic(() => {
      const a = store.createAttachment({
        ...key, netns: env.netns, cniArgs: env.args, cniPath: env.path, cniVersion: conf.cniVersion,
        bootId: this.opts.bootId, config: configText, podNamespace: pod.namespace, podName: pod.name, podUid: pod.uid,
      });
      return { a, first: store.insertStep({ ...(plan[0] as PlannedStep).row, attachmentId: a.id }) };
    });
    const alog = this.log.child({ containerId: key.containerId, ...podLogFields(pod), network: key.network, ifname: key.ifname, attachment: a.id });
    this.adding.add(a.id);
    try {
      return await this.addAndRollBack(a, env, conf, plan, first, alog);
    } finally {
      this.adding.delete(a.id);
    }
  }

  /** Runs the chain; on any failure rolls back every started step and rethrows the original error. */
  private async addAndRollBack(a: Attachment, env: CniEnv, conf: StewardConf, plan: PlannedStep[], first: Step, alog: Logger): Promise<string> {
    const { store } = this;
    try {
      const text = await this.runAddChains(a, env, conf, plan, first);
      alog.info('attachment added');
      return text;
    } catch (e) {
      const err = CniError.from(e, ErrorCode.PluginExecFailed);
      alog.warn({ err: err.message, code: err.code }, 'ADD failed; rolling back every started step');
      try {
        store.setAttachmentError(a.id, err.message);
        const outcome = await this.teardown.run(a.id, Priority.Add, { force: true });
        if (!outcome.done) alog.error({ err: outcome.error?.message }, 'rollback incomplete; the failed step stays queued for retry');
      } catch (re) {
        // The journal could not be written (disk full): every step is still on disk as `adding`
        // or `deleting`, and the retry scheduler reclaims it once writes succeed again.
        alog.error({ err: (re as Error).message }, 'rollback could not run; the retry scheduler reclaims it');
      }
      throw err;
    }
  }

  /**
   * Runs the planned steps in order, passing prevResult within each delegate. Each success is
   * committed together with the next step's `adding` row (or, after the last, with the attachment's
   * result), so every row is on disk before its plugin runs at one commit per plugin.
   */
  private async runAddChains(a: Attachment, env: CniEnv, conf: StewardConf, plan: PlannedStep[], first: Step): Promise<string> {
    const { store } = this;
    const finals = new Map<number, CniResult>();
    let step = first;
    for (const [i, planned] of plan.entries()) {
      const { d, plugin, stdin } = planned;
      const prev = finals.get(d.index);
      let result: CniResult;
      try {
        const out = await this.limiter.run(Priority.Add, () => this.opts.run({
          command: 'ADD', type: plugin.type, containerId: env.containerId, netns: env.netns, ifname: d.ifname,
          args: env.args, cniPath: env.path, stdin: prev ? { ...stdin, prevResult: prev } : stdin,
        }));
        if (out === undefined) throw new CniError(ErrorCode.PluginExecFailed, `plugin ${plugin.type} ADD succeeded but printed no result`);
        result = convertResult(out, d.cniVersion);
      } catch (e) {
        const err = CniError.from(e, ErrorCode.PluginExecFailed);
        store.setStepState(step.id, 'add_failed', err.message);
        throw err;
      }
      finals.set(d.index, result);
      const next = plan[i + 1];
      if (next) {
        const done = step;
        step = store.atomic(() => {
          store.setStepAdded(done.id, JSON.stringify(result));
          return store.insertStep({ ...next.row, attachmentId: a.id });
        });
      } else {
        const text = JSON.stringify(convertResult(finals.get(0) ?? { cniVersion: conf.cniVersion }, conf.cniVersion));
        const done = step;
        store.atomic(() => {
          store.setStepAdded(done.id, JSON.stringify(result));
          store.setAttachmentAdded(a.id, text);
        });
        return text;
      }
    }
    throw new CniError(ErrorCode.Internal, 'empty plugin plan');
  }

  // ---- DEL

  private del(env: CniEnv, config: Record<string, unknown>): Promise<string> {
    // DEL must succeed for as much input as possible (a stuck DEL blocks the sandbox forever):
    // only the network name is needed to find the attachment; the stored config does the rest.
    const network = typeof config.name === 'string' ? config.name : '';
    if (network === '') throw new CniError(ErrorCode.InvalidConfig, 'netconf has no network "name"');
    const key = { containerId: env.containerId, network, ifname: env.ifname };
    const k = keyString(key);
    if (this.tombstones.has(k)) {
      this.opts.metrics.coalescedDels.inc({ how: 'tombstone' });
      this.log.debug({ containerId: key.containerId, ...podLogFields(podFromCniArgs(env.args)), network, ifname: key.ifname }, 'DEL answered from a tombstone: already torn down');
      return Promise.resolve('');
    }
    const joined = this.dels.get(k);
    if (joined) {
      this.opts.metrics.coalescedDels.inc({ how: 'joined' });
      this.log.debug({ containerId: key.containerId, ...podLogFields(podFromCniArgs(env.args)), network, ifname: key.ifname }, 'DEL joined one queued or in flight');
      return joined;
    }
    const p = this.queue.run(env.containerId, () => this.gate.shared(() => this.delLocked(env, config, key)));
    this.dels.set(k, p);
    const forget = () => { if (this.dels.get(k) === p) this.dels.delete(k); };
    p.then(forget, forget);
    return p;
  }

  private async delLocked(env: CniEnv, config: Record<string, unknown>, key: AttachmentKey): Promise<string> {
    const a = this.store.currentAttachment(key);
    if (!a) {
      await this.passThroughDel(env, config, key);
      this.rememberTombstone(key);
      return '';
    }
    if (a.state === 'deleted') {
      this.rememberTombstone(key);
      this.opts.metrics.coalescedDels.inc({ how: 'tombstone' });
      this.log.info({ containerId: key.containerId, ...podLogFields(podOf(a)), network: key.network, ifname: key.ifname, attachment: a.id },
        'DEL of an attachment already torn down (rolled back, or DELed before)');
      return '';
    }
    // The first DEL runs at once. Once a teardown is failing, repeated DELs do not re-run the
    // failing plugin (that is how a DEL storm becomes an outage); the retry schedule owns it.
    const outcome = await this.teardown.run(a.id, Priority.Del, { force: a.state !== 'deleting' });
    if (outcome.done) this.rememberTombstone(key);
    else this.log.info({ containerId: key.containerId, ...podLogFields(podOf(a)), network: key.network, ifname: key.ifname, attachment: a.id, err: outcome.error?.message },
      `DEL: teardown not finished; the retry scheduler owns it (policy ${this.opts.delPolicy})`);
    if (!outcome.done && this.opts.delPolicy === 'strict') {
      const err = outcome.error ?? new CniError(ErrorCode.TeardownPending, 'teardown is incomplete');
      // Runtimes read "not found" in a DEL error as success: keep a failure a failure.
      throw new CniError(err.code, failureSafeText(err.message), err.details && failureSafeText(err.details));
    }
    return '';
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
  private async passThroughDel(env: CniEnv, config: Record<string, unknown>, key: AttachmentKey): Promise<void> {
    const pod = podFromCniArgs(env.args);
    const log = this.log.child({ containerId: key.containerId, ...podLogFields(pod), network: key.network, ifname: key.ifname });
    let conf: StewardConf | undefined;
    try {
      conf = parseStewardConf(config, env.ifname);
    } catch (e) {
      log.warn({ err: (e as Error).message }, 'DEL for an unknown attachment with an unusable netconf; nothing to run');
    }
    if (conf) {
      for (const d of [...conf.delegates].reverse()) {
        for (const plugin of [...d.plugins].reverse()) {
          try {
            await this.limiter.run(Priority.Del, () => this.opts.run({
              command: 'DEL', type: plugin.type, containerId: env.containerId, netns: env.netns, ifname: d.ifname,
              args: env.args, cniPath: env.path, stdin: pluginStdin(d, plugin, conf.runtimeConfig),
            }));
          } catch (e) {
            log.warn({ plugin: plugin.type, err: (e as Error).message }, 'pass-through DEL failed; ignored, since this attachment was never added through steward');
          }
        }
      }
    }
    this.store.createAttachment({
      ...key, netns: env.netns, cniArgs: env.args, cniPath: env.path,
      cniVersion: typeof config.cniVersion === 'string' ? config.cniVersion : '',
      bootId: this.opts.bootId, config: JSON.stringify(config), podNamespace: pod.namespace, podName: pod.name, podUid: pod.uid,
    }, 'deleted');
    log.info('DEL for an attachment steward never added: passed through once, tombstone written');
  }

  // ---- CHECK

  private check(env: CniEnv, config: Record<string, unknown>): Promise<string> {
    const conf = parseStewardConf(config, env.ifname);
    const key = { containerId: env.containerId, network: conf.name, ifname: env.ifname };
    return this.queue.run(env.containerId, () => this.gate.shared(() => this.checkLocked(env, key)));
  }

  private async checkLocked(env: CniEnv, key: AttachmentKey): Promise<string> {
    const a = this.store.currentAttachment(key);
    if (!a) {
      throw new CniError(ErrorCode.UnknownContainer,
        `container ${key.containerId} has no attachment on network ${key.network} interface ${key.ifname}`);
    }
    if (a.state !== 'added') {
      throw new CniError(ErrorCode.AttachmentGone,
        `attachment of container ${key.containerId} on ${key.network}/${key.ifname} is ${a.state}, not added`);
    }
    const nsWhy = netnsProblem(env.netns);
    if (nsWhy) throw new CniError(ErrorCode.InvalidEnv, nsWhy);
    const stored = parseStewardConf(JSON.parse(a.config), a.ifname);
    const steps = this.store.stepsOf(a.id);
    const finals = finalResults(steps);
    for (const step of steps) {
      const d = stored.delegates[step.delegateIndex];
      // A delegate may opt out with disableCheck (libcni skips it too); anything else is checked.
      if (!d || d.disableCheck) continue;
      const stdin = JSON.parse(step.config) as Record<string, unknown>;
      // CHECK exists from 0.4.0 on: a delegate declared older is checked at a version its plugin
      // supports, never skipped (skipping answered "healthy" for a deleted interface).
      const version = versionAtLeast(d.cniVersion, '0.4.0') ? d.cniVersion
        : await checkVersionFor(step.pluginType, d.name, (call) => this.limiter.run(Priority.Add, () => this.opts.run({
          ...call, containerId: a.containerId, netns: env.netns, ifname: step.ifname, args: env.args, cniPath: env.path,
        })));
      stdin.cniVersion = version;
      const prev = finals.get(step.delegateIndex);
      if (prev) stdin.prevResult = convertResult(prev, version);
      await this.limiter.run(Priority.Add, () => this.opts.run({
        command: 'CHECK', type: step.pluginType, containerId: a.containerId, netns: env.netns, ifname: step.ifname,
        args: env.args, cniPath: env.path, stdin,
      }));
    }
    return '';
  }

  /**
   * A runtime passes runtimeConfig only for capabilities the steward entry itself declares; a
   * delegate plugin declaring one the entry does not will never get it (port mappings dropped
   * silently). Said once per network and capability, in the log and /v1/status.
   */
  private checkCapabilities(conf: StewardConf, config: Record<string, unknown>): void {
    const own = config.capabilities;
    const declared = typeof own === 'object' && own !== null ? (own as Record<string, unknown>) : {};
    for (const d of conf.delegates) {
      for (const p of d.plugins) {
        for (const [cap, on] of Object.entries(p.capabilities ?? {})) {
          if (on !== true || declared[cap] === true) continue;
          this.warnOnce(`${conf.name}\0${cap}`,
            `network ${conf.name}: delegate ${d.name} plugin ${p.type} declares capability "${cap}" but the steward entry does not, so the runtime never passes it; add "capabilities": {"${cap}": true} to the steward entry`,
            { network: conf.name, delegate: d.name, plugin: p.type, capability: cap });
        }
      }
    }
  }
}

interface PlannedStep {
  d: Delegate;
  plugin: PluginConf;
  stdin: Record<string, unknown>;
  row: Omit<NewStep, 'attachmentId'>;
}

/** Every plugin of every delegate, in execution order, with the stdin it will get (less prevResult). */
function planSteps(conf: StewardConf): PlannedStep[] {
  const plan: PlannedStep[] = [];
  for (const d of conf.delegates) {
    for (const [pluginIndex, plugin] of d.plugins.entries()) {
      const stdin = pluginStdin(d, plugin, conf.runtimeConfig);
      plan.push({
        d, plugin, stdin,
        row: { seq: plan.length, delegateIndex: d.index, delegateName: d.name, ifname: d.ifname, pluginIndex, pluginType: plugin.type, config: JSON.stringify(stdin) },
      });
    }
  }
  return plan;
}

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

function convertedResult(text: string, version: string): string {
  return JSON.stringify(convertResult(JSON.parse(text), version));
}
