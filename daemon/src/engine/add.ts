// ADD: the chain of every delegate run in order, the whole chain journaled (one synced commit)
// before the first plugin runs, and on any failure every started step rolled back by the teardown rules. Serialised per
// container by the dispatcher (engine.ts), which calls addAttachment inside the container's queue.

import type { Logger } from 'pino';
import {
  clip,
  CniError,
  ErrorCode,
  convertResult,
  podFromCniArgs,
  podLogFields,
  type CniEnv,
  type CniResult,
  type PluginConf,
} from '@cni-steward/shared';
import type { Attachment, AttachmentKey, NewStep, Step } from '../store/types.js';
import type { EngineContext } from './context.js';
import { answerBudgetMs } from './answer-budget.js';
import { Priority } from './limiter.js';
import { attachmentRow } from './attachment-row.js';
import { netnsIdentity } from './netns.js';
import { refuseHeld } from './interface-holders.js';
import { pluginStdin, type Delegate, type StewardConf } from './netconf.js';
import { journalProcess } from './plugin-processes.js';
import { pluginCall, requestTarget } from '../plugins/call.js';

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
        d,
        plugin,
        stdin,
        row: {
          seq: plan.length,
          delegateIndex: d.index,
          delegateName: d.name,
          ifname: d.ifname,
          pluginIndex,
          pluginType: plugin.type,
          config: JSON.stringify(stdin),
        },
      });
    }
  }
  return plan;
}

/**
 * A runtime passes runtimeConfig only for capabilities the steward entry itself declares; a
 * delegate plugin declaring one the entry does not will never get it (port mappings dropped
 * silently). Said once per network and capability, in the log and /v1/status.
 */
export function checkCapabilities(ctx: EngineContext, conf: StewardConf, config: Record<string, unknown>): void {
  const own = config.capabilities;
  const declared = typeof own === 'object' && own !== null ? (own as Record<string, unknown>) : {};
  for (const d of conf.delegates) {
    for (const p of d.plugins) {
      for (const [cap, on] of Object.entries(p.capabilities ?? {})) {
        if (on !== true || declared[cap] === true) continue;
        ctx.warn(
          `${conf.name}\0${cap}`,
          `network ${conf.name}: delegate ${d.name} plugin ${p.type} declares capability "${cap}" but the steward entry does not, so the runtime never passes it; add "capabilities": {"${cap}": true} to the steward entry`,
          { network: conf.name, delegate: d.name, plugin: p.type, capability: cap },
        );
      }
    }
  }
}

/** What an ADD answers when its requester stopped waiting (the shim's bound passed, or the runtime gave up). */
function unheard(what: string): CniError {
  return new CniError(
    ErrorCode.TryAgainLater,
    `the ADD's requester closed its connection before the answer (its bound passed while the ADD waited or ran); ${what}`,
  );
}

/**
 * ADD of one attachment; runs inside the container's queue. Resolves with the result text to print.
 * `clientGone` (the route's view of the connection): the shim that asked has already answered the
 * runtime "try again later", and a runtime that does not DEL after a failed ADD (containerd 1.6.37+,
 * 1.7.23+, 2.x) would never free what this ADD allocates. So an ADD nobody waits for any more is not
 * started, and one whose requester left while it ran is rolled back like a failed one.
 */
export async function addAttachment(
  ctx: EngineContext,
  env: CniEnv,
  conf: StewardConf,
  key: AttachmentKey,
  hold: (after: Promise<unknown>) => void = () => undefined,
  clientGone: () => boolean = () => false,
): Promise<string> {
  if (clientGone()) throw unheard('nothing was run');
  const deadline = performance.now() + answerBudgetMs(conf.raw.timeouts);
  const configText = JSON.stringify(conf.raw);
  const repeated = await settleEarlier(ctx, env, conf, key, configText);
  if (repeated !== undefined) return repeated;
  // Which namespace the path names now, in the container's turn after its check (engine.ts): read
  // once, for the interfaces held there and for the journal (teardown passes the path only while it
  // still names this one).
  const identity = netnsIdentity(env.netns);
  refuseHeld(ctx.store, key, { netns: env.netns, identity, bootId: ctx.bootId }, conf);

  // Every plugin must exist before anything is journaled or run: a chain that cannot complete
  // should fail without allocating (and then owing a DEL to a plugin that is not there).
  for (const d of conf.delegates) for (const p of d.plugins) ctx.locate(p.type, env.path);

  const plan = planSteps(conf);
  const pod = podFromCniArgs(env.args);
  const { a, steps } = journalAttachment(ctx, env, conf, key, configText, plan, pod, identity ?? null);
  const alog = ctx.log.child({
    containerId: key.containerId,
    ...podLogFields(pod),
    network: key.network,
    ifname: key.ifname,
    attachment: a.id,
  });
  ctx.adding.add(a.id);
  let rollback: Promise<void> | undefined;
  try {
    const text = await runChains(ctx, a, env, conf, plan, steps, deadline);
    if (clientGone()) throw unheard('every started step is rolled back');
    alog.info('attachment added');
    return text;
  } catch (e) {
    const err = CniError.from(e, ErrorCode.PluginExecFailed);
    rollback = rollBack(ctx, a, err, alog);
    // The runtime hears the plugin's own error now; the rollback (every started step is on disk,
    // so recovery finishes it after a crash) runs after the answer, still before the container's
    // next request: a hanging DEL never pushes the answer past the shim's bound.
    hold(rollback);
    throw err;
  } finally {
    if (rollback) void rollback.finally(() => ctx.adding.delete(a.id));
    else ctx.adding.delete(a.id);
  }
}

/**
 * What an earlier attachment of the same key means for this ADD: the very same one already added is
 * answered from the journal (its result text); another one added is a conflict; one `adding` (an
 * ADD whose journal was cut off: this runs inside the container's queue, so none of it is running)
 * or `deleting` (still owing DELs) is finished first, since adding again now could let a later DEL
 * of the old one release what this ADD allocates. Undefined: go on with the ADD.
 */
async function settleEarlier(
  ctx: EngineContext,
  env: CniEnv,
  conf: StewardConf,
  key: AttachmentKey,
  configText: string,
): Promise<string | undefined> {
  const existing = ctx.store.currentAttachment(key);
  if (existing && existing.state === 'added') {
    if (existing.netns === env.netns && existing.config === configText && existing.result) {
      // Not where a path made again for a new namespace leads: the result's interfaces are not there.
      const now = existing.netnsId == null ? undefined : netnsIdentity(env.netns);
      if (now === undefined || now === existing.netnsId)
        return JSON.stringify(convertResult(JSON.parse(existing.result), conf.cniVersion));
      throw new CniError(
        ErrorCode.AttachmentConflict,
        `container ${key.containerId} already has interface ${key.ifname} on network ${key.network} in the namespace ${clip(env.netns, 200)} named when it was added, and that path names another namespace now; DEL it before adding again`,
      );
    }
    throw new CniError(
      ErrorCode.AttachmentConflict,
      `container ${key.containerId} already has interface ${key.ifname} on network ${key.network}; DEL it before adding again`,
    );
  }
  if (existing && (existing.state === 'deleting' || existing.state === 'adding')) {
    // A step that can only fail the same way is abandoned now rather than block this ADD.
    const outcome = await ctx.teardown.run(existing.id, Priority.Add, { force: true, abandonPermanent: true });
    if (!outcome.done) {
      throw new CniError(
        ErrorCode.TryAgainLater,
        `an earlier attachment of container ${key.containerId} on ${key.network}/${key.ifname} is still being torn down`,
        outcome.error?.message,
      );
    }
  }
  return undefined;
}

/**
 * The attachment and its whole chain as one commit, synced before the first plugin runs: the first
 * step `adding`, the others `planned`. It is the ADD's only fsync; every later write of it is
 * relaxed (docs/architecture.md, "Journal durability").
 */
function journalAttachment(
  ctx: EngineContext,
  env: CniEnv,
  conf: StewardConf,
  key: AttachmentKey,
  configText: string,
  plan: PlannedStep[],
  pod: ReturnType<typeof podFromCniArgs>,
  netnsId: string | null,
): { a: Attachment; steps: Step[] } {
  const { store } = ctx;
  return store.atomic(() => {
    const a = store.createAttachment(attachmentRow(ctx.bootId, env, key, conf.cniVersion, configText, pod, netnsId));
    const steps = plan.map((p, i) =>
      store.insertStep({ ...p.row, attachmentId: a.id }, i === 0 ? 'adding' : 'planned'),
    );
    return { a, steps };
  });
}

/** Rolls back every started step of a failed ADD; never rejects (the scheduler reclaims what is left). */
async function rollBack(ctx: EngineContext, a: Attachment, err: CniError, alog: Logger): Promise<void> {
  alog.warn({ err: err.message, code: err.code }, 'ADD failed; answered, rolling back every started step');
  try {
    ctx.store.setAttachmentError(a.id, err.message);
    // Yield first so the answer leaves before the first rollback DEL is spawned.
    await new Promise((r) => setImmediate(r));
    const outcome = await ctx.teardown.run(a.id, Priority.Add, { force: true });
    if (!outcome.done)
      alog.error({ err: outcome.error?.message }, 'rollback incomplete; the failed step stays queued for retry');
    else alog.info('failed ADD rolled back');
  } catch (re) {
    // The journal could not be written (disk full): every step is still on disk as `adding`
    // or `deleting`, and the retry scheduler reclaims it once writes succeed again.
    alog.error({ err: (re as Error).message }, 'rollback could not run; the retry scheduler reclaims it');
  }
}

/** One journaled step: its plugin's ADD, the result converted to its delegate's version, or `add_failed`. */
async function runStep(
  ctx: EngineContext,
  env: CniEnv,
  step: Step,
  planned: PlannedStep,
  prev: CniResult | undefined,
  deadline: number,
): Promise<CniResult> {
  const { d, plugin, stdin } = planned;
  try {
    const out = await ctx.slots.run(
      Priority.Add,
      pluginCall('ADD', plugin.type, prev ? { ...stdin, prevResult: prev } : stdin, requestTarget(env, d.ifname), {
        onStart: journalProcess(ctx.store, ctx.log, step.id),
        budgetMs: deadline - performance.now(),
      }),
    );
    if (out === undefined)
      throw new CniError(ErrorCode.PluginExecFailed, `plugin ${plugin.type} ADD succeeded but printed no result`);
    try {
      return convertResult(out, d.cniVersion);
    } catch (e) {
      // The runtime's input was fine (6 and 1 are about it): the delegate's answer is not (100).
      throw new CniError(
        ErrorCode.PluginExecFailed,
        `plugin ${plugin.type} ADD printed a result steward cannot use: ${(e as Error).message}`,
      );
    }
  } catch (e) {
    const err = CniError.from(e, ErrorCode.PluginExecFailed);
    ctx.store.setStepState(step.id, 'add_failed', err.message);
    throw err;
  }
}

/**
 * Runs the planned steps in order, passing prevResult within each delegate. Every step is on disk
 * (synced, `planned` or `adding`) before the first plugin runs. Each success is committed relaxed
 * together with the next step's `adding` (or, after the last, with the attachment's result): a
 * step is `adding` before its plugin starts in a commit that survives this process's death, so
 * recovery in the same boot knows exactly which plugins ran; after a kernel crash the reboot sweep
 * DELs every step of the old boot that is not torn down, `planned` ones too.
 */
async function runChains(
  ctx: EngineContext,
  a: Attachment,
  env: CniEnv,
  conf: StewardConf,
  plan: PlannedStep[],
  steps: Step[],
  deadline: number,
): Promise<string> {
  const { store } = ctx;
  const finals = new Map<number, CniResult>();
  for (const [i, planned] of plan.entries()) {
    const step = steps[i] as Step;
    const result = await runStep(ctx, env, step, planned, finals.get(planned.d.index), deadline);
    finals.set(planned.d.index, result);
    const next = steps[i + 1];
    if (next) {
      store.relaxed(() => {
        store.setStepAdded(step.id, JSON.stringify(result));
        store.startStep(next.id);
      });
    } else {
      const text = JSON.stringify(convertResult(finals.get(0) ?? { cniVersion: conf.cniVersion }, conf.cniVersion));
      store.relaxed(() => {
        store.setStepAdded(step.id, JSON.stringify(result));
        store.setAttachmentAdded(a.id, text);
      });
      return text;
    }
  }
  throw new CniError(ErrorCode.Internal, 'empty plugin plan');
}
