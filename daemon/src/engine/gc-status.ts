// GC and STATUS (CNI 1.1). GC tears down every stored attachment of the network that was settled
// when the GC arrived and that the runtime no longer lists as valid, each in its container's queue
// like any DEL; then it passes GC on to delegates that speak 1.1 (with the runtime's list and
// whatever is still held as valid), holding the gate exclusively, since the spec forbids that
// alongside ADD or DEL, and keeps requests queued behind its wait for at most
// GC_GATE_PREFERENCE_MS. STATUS is called by containerd 2.x
// on every CRI Status request, so delegate answers are cached briefly.

import { CniError, ErrorCode, podLogFields, versionAtLeast, type CniEnv } from '@cni-steward/shared';
import { podOf, type Attachment } from '../store/types.js';
import type { EngineContext } from './context.js';
import { Priority } from './limiter.js';
import { parseServedConf, pluginStdin, type StewardConf } from './netconf.js';
import { pluginCall } from '../plugins/call.js';

/**
 * How long requests arriving while a GC waits for the gate queue behind it (gate.ts: a waiting
 * writer is preferred). Past it the GC still waits, for a moment with nothing running, and lets
 * them pass: a GC arriving while a plugin hangs in a DEL held every pod start on the node until that
 * plugin's --plugin-timeout. It is not refused: CRI-O runs its one GC at start-up and never again.
 */
export const GC_GATE_PREFERENCE_MS = 2000;

/** GC and STATUS use the shared engine context (context.ts). */
export type GcDeps = Pick<EngineContext, 'store' | 'slots' | 'teardown' | 'gate' | 'log' | 'serialize'>;

interface ValidAttachment {
  containerID: string;
  ifname: string;
}

/**
 * The runtime's list of attachments still valid. The spec makes it part of every GC's input; a GC
 * without it is refused (code 7), never read as "none is valid", which would tear down every pod of
 * the network that steward holds. (cnitool's `gc` sends none; libcni has by then DELed every
 * attachment in its own cache, which this does not stop.) `null` is an empty list: libcni sends its
 * nil slice so on a node with no pods.
 */
function validAttachments(config: Record<string, unknown>): ValidAttachment[] {
  const key = ['cni.dev/valid-attachments', 'cni.dev/attachments'].find((k) => Object.hasOwn(config, k));
  if (key === undefined) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      'GC names no cni.dev/valid-attachments: without the list every attachment of the network would be torn down',
      'send "cni.dev/valid-attachments": [] to collect every one of them',
    );
  }
  const list = config[key] ?? [];
  if (!Array.isArray(list)) throw new CniError(ErrorCode.InvalidConfig, 'cni.dev/valid-attachments must be a list');
  return list.map((v, i) => {
    const o = v as Record<string, unknown>;
    if (typeof o?.containerID !== 'string' || typeof o?.ifname !== 'string') {
      throw new CniError(
        ErrorCode.InvalidConfig,
        `cni.dev/valid-attachments[${i}] needs string containerID and ifname`,
      );
    }
    return { containerID: o.containerID, ifname: o.ifname };
  });
}

/**
 * GC of one network. `clientGone` (the route's view of the connection): a GC whose shim has already
 * answered the runtime (its bound passed while stewardd was frozen, or the gate was held) tears down
 * nothing more and asks no delegate once its turn comes: nobody hears its answer, and the runtime
 * sends its list again with its next GC.
 */
export async function runGc(
  deps: GcDeps,
  env: CniEnv,
  config: Record<string, unknown>,
  clientGone: () => boolean = () => false,
): Promise<string> {
  const conf = parseServedConf(config, 'eth0');
  if (!versionAtLeast(conf.cniVersion, '1.1.0')) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `GC needs cniVersion 1.1.0 or later, the netconf says ${conf.cniVersion}`,
    );
  }
  if (conf.disableGC) return '';
  const runtimeValid = validAttachments(config);
  const log = deps.log.child({ network: conf.name, command: 'GC' });
  // No await when nothing is stale: requests arriving after the GC then queue behind it at the gate.
  const stale = staleAttachments(deps, conf.name, runtimeValid);
  const swept = stale.length > 0 ? await sweepStale(deps, stale, clientGone, log) : 0;
  log.info({ collected: swept, valid: runtimeValid.length }, 'GC swept attachments the runtime no longer lists');

  return deps.gate.exclusive(async () => {
    if (clientGone())
      throw new CniError(
        ErrorCode.TryAgainLater,
        swept === 0
          ? "the GC's requester closed its connection before its turn came (its bound passed); nothing was torn down"
          : `the GC's requester closed its connection before its turn came (its bound passed); ${swept} stale attachment(s) had been torn down, no delegate was asked to GC`,
      );
    const errors = await gcDelegates(deps, conf, env, runtimeValid);
    if (errors.length > 0) throw new CniError(ErrorCode.PluginExecFailed, `delegate GC failed: ${errors.join('; ')}`);
    return '';
  }, GC_GATE_PREFERENCE_MS);
}

/**
 * The attachments the runtime no longer lists. Only those settled (`added`) when the GC arrived: the
 * runtime made its list before it sent the GC, so a pod whose ADD was still running then, or came
 * after it (requests pass a GC that lost its preference at the gate), is missing from the list and
 * is kept (before, such a pod was torn down a moment after its ADD succeeded).
 */
function staleAttachments(deps: GcDeps, network: string, runtimeValid: readonly ValidAttachment[]): Attachment[] {
  const valid = new Set(runtimeValid.map((v) => JSON.stringify([v.containerID, v.ifname])));
  return deps.store
    .liveAttachmentsOfNetwork(network)
    .filter((a) => a.state === 'added' && !valid.has(JSON.stringify([a.containerId, a.ifname])));
}

/**
 * The stale attachments' teardowns, before the GC takes the gate: each in its container's queue,
 * holding the gate shared as a DEL does, so a stale pod whose plugin hangs holds its own container
 * only (inside the GC's exclusive hold it held every pod start on the node for up to
 * --plugin-timeout). In parallel: the plugin slots bound the executions. Returns how many ran.
 */
async function sweepStale(
  deps: GcDeps,
  stale: readonly Attachment[],
  clientGone: () => boolean,
  log: GcDeps['log'],
): Promise<number> {
  let swept = 0;
  await Promise.all(
    stale.map((a) =>
      deps.serialize(a.containerId, async () => {
        // Its requester may have gone, or a DEL queued ahead of it run meanwhile: torn down, or
        // failed and `deleting`, owned by the retry schedule (forcing it again at once would run a
        // failing plugin again and hold the GC's answer for one more --plugin-timeout).
        if (clientGone() || deps.store.getAttachment(a.id)?.state !== 'added') return;
        swept++;
        const outcome = await deps.teardown.run(a.id, Priority.Background, { force: true });
        if (!outcome.done)
          log.warn(
            { containerId: a.containerId, ...podLogFields(podOf(a)), err: outcome.error?.message },
            'GC teardown incomplete; queued for retry',
          );
      }),
    ),
  );
  return swept;
}

/**
 * GC passed on to the delegates that speak 1.1, each plugin asked in turn; the failures, by plugin.
 * Each is told what is still valid: every attachment the runtime listed, and every one we hold
 * (adding or added). Not only ours: a pod added before steward was installed is the runtime's and
 * the delegate's alone, and a delegate told to keep only ours would free its address for the next
 * pod (duplicate IPs). A held one is named at the interface each of its steps ran at (the
 * journal's), not only the one this netconf would give it now: a first delegate with its own
 * ifname, or a delegate moved by an edited netconf, keyed its IPAM by the old one (found by a
 * hostile review). A stale one whose teardown failed is left out, so the delegate's own GC can free
 * what its DEL could not.
 */
async function gcDelegates(
  deps: GcDeps,
  conf: StewardConf,
  env: CniEnv,
  runtimeValid: readonly ValidAttachment[],
): Promise<string[]> {
  const held = deps.store.liveAttachmentsOfNetwork(conf.name);
  const heldSteps = held.flatMap((a) => deps.store.stepsOf(a.id).map((s) => ({ containerId: a.containerId, s })));
  const errors: string[] = [];
  for (const d of conf.delegates) {
    if (d.disableGC || !versionAtLeast(d.cniVersion, '1.1.0')) continue;
    // The runtime's CNI_IFNAME is the first delegate's unless it names its own (netconf.ts toDelegate).
    const ifnameFor = (ifname: string) => (d.index === 0 && !d.ownIfname ? ifname : d.ifname);
    const keep = new Map<string, ValidAttachment>();
    for (const [containerID, ifname] of [
      ...runtimeValid.map((v) => [v.containerID, ifnameFor(v.ifname)] as const),
      ...held.map((a) => [a.containerId, ifnameFor(a.ifname)] as const),
      ...heldSteps
        .filter(({ s }) => s.delegateName === d.name)
        .map(({ containerId, s }) => [containerId, s.ifname] as const),
    ]) {
      keep.set(JSON.stringify([containerID, ifname]), { containerID, ifname });
    }
    const stillValid = [...keep.values()];
    for (const plugin of d.plugins) {
      try {
        const stdin = { ...pluginStdin(d, plugin, {}), 'cni.dev/valid-attachments': stillValid };
        // GC is about no container: only CNI_PATH is set.
        await deps.slots.run(Priority.Background, pluginCall('GC', plugin.type, stdin, { cniPath: env.path }));
      } catch (e) {
        errors.push(`${d.name}/${plugin.type}: ${(e as Error).message}`);
      }
    }
  }
  return errors;
}

/**
 * Delegate STATUS answers, kept for a few seconds per netconf, and the one delegate STATUS pass in
 * flight per netconf (issue 28 item 5): containerd asks on every CRI Status call, and once the cache
 * expired 200 concurrent STATUS execs ran the delegates' STATUS 181 times, starving each other past
 * the shim's 750 ms bound. Now the first runs it and the others wait for its answer.
 */
export class StatusCache {
  private readonly entries = new Map<string, { at: number; error?: CniError }>();
  private readonly inFlight = new Map<string, Promise<void>>();
  constructor(
    readonly ttlMs = 5000,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: string): { error?: CniError } | undefined {
    const e = this.entries.get(key);
    if (!e || this.now() - e.at > this.ttlMs) return undefined;
    return e;
  }

  set(key: string, error?: CniError): void {
    if (this.entries.size > 256) this.entries.clear();
    this.entries.set(key, error ? { at: this.now(), error } : { at: this.now() });
  }

  /** The cached answer, or the pass in flight for `key`, or `pass` run now (its answer cached and shared). */
  answer(key: string, pass: () => Promise<void>): Promise<void> {
    const cached = this.get(key);
    if (cached) return cached.error ? Promise.reject(cached.error) : Promise.resolve();
    const running = this.inFlight.get(key);
    if (running) return running;
    const p = pass().then(
      () => this.set(key),
      (e: unknown) => {
        const err = CniError.from(e, ErrorCode.PluginNotAvailable);
        this.set(key, err);
        throw err;
      },
    );
    const done = () => void this.inFlight.delete(key);
    p.then(done, done);
    this.inFlight.set(key, p);
    return p;
  }
}

export async function runStatus(
  deps: GcDeps,
  env: CniEnv,
  config: Record<string, unknown>,
  cache: StatusCache,
): Promise<string> {
  const conf = parseServedConf(config, 'eth0');
  if (!versionAtLeast(conf.cniVersion, '1.1.0')) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `STATUS needs cniVersion 1.1.0 or later, the netconf says ${conf.cniVersion}`,
    );
  }
  await cache.answer(JSON.stringify(conf.raw), async () => {
    for (const d of conf.delegates) {
      if (!versionAtLeast(d.cniVersion, '1.1.0')) continue;
      for (const plugin of d.plugins) {
        const stdin = pluginStdin(d, plugin, {});
        await deps.slots.run(Priority.Add, pluginCall('STATUS', plugin.type, stdin, { cniPath: env.path }));
      }
    }
  });
  return '';
}
