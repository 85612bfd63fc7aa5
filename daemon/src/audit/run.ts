// One audit pass: gather what is held on the node (host-local leases, libcni cache files, portmap's
// iptables rules, steward's own journal attachments), ask the runtime who is alive, decide
// (decide.ts), and, when asked to, release each orphan through its proper path after asking the
// runtime again: a journalled container through the engine's normal teardown (its ADD-time config,
// with retries), an unjournalled lease through a host-local DEL, an unjournalled portmap rule through
// a portmap DEL, a cache file by unlinking it. Every release is logged with its evidence.

import { existsSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { PluginRunner } from '../plugins/executor.js';
import type { Attachment, Step } from '../store/types.js';
import { scanCache } from './cache.js';
import { decide, type Decision, type Finding } from './decide.js';
import { scanLeases, type NetworkLock } from './leases.js';
import { DEFAULT_RELEASE_CAP } from './options.js';
import { parsePortmapRules, portmapDelConfig, portmapFindings, type Family } from './portmap.js';

export interface RuntimeInfo {
  reachable: boolean;
  endpoint: string | null;
  /** Sandboxes listed, when reachable. */
  sandboxes?: number;
  message?: string;
  /**
   * In a report: the runtime answered the pass's first ask and stopped answering before a release
   * (what was released before stands; the rest was only reported).
   */
  lostDuringPass?: boolean;
}

export interface AuditDeps {
  /** The journal, read through store/ queries only. */
  journal: {
    attachmentsInState(state: Attachment['state']): Attachment[];
    stepsOf(attachmentId: number): Step[];
  };
  /** The engine's teardown of one journalled attachment (its normal DEL path). */
  teardown: (attachmentId: number) => Promise<{ done: boolean; error?: Error }>;
  /** Runs a plugin (the executor's run): a host-local DEL for an unjournalled lease. */
  run: PluginRunner;
  /** Sandbox ids the runtime lists; null when no runtime is reachable. */
  listSandboxes: () => Promise<string[] | null>;
  runtime: () => RuntimeInfo;
  /** host-local dataDirs always scanned (besides those named in journalled configs). */
  leaseDirs: readonly string[];
  cacheDir: string;
  /**
   * `iptables-save -t nat` (or ip6tables-save) output, run through plugins/; absent: portmap's rules
   * are not scanned. A family whose read fails is logged and skipped.
   */
  readNat?: (family: Family) => Promise<string>;
  /**
   * When this daemon first saw each portmap rule (by path and container id), kept across passes: a
   * rule has no timestamp, and one whose container left no lease or cache file ages from here.
   */
  firstSeen?: Map<string, number>;
  /** Only portmap rules of these networks; empty or absent = every network's. */
  portmapNetworks?: readonly string[];
  /**
   * host-local's own lock of a network directory, held while its lease files are read (plugins/
   * flock.ts) and released before anything is released (host-local's DEL takes it itself).
   */
  lockNetwork?: NetworkLock;
  /** CNI_PATH for the host-local DEL (searched after the daemon's bin dirs). */
  cniPath?: string;
  log: Logger;
  now?: () => number;
}

export interface AuditOptions {
  release: boolean;
  graceMs: number;
  cap?: number;
  /** This pass asks the CRI runtime on this socket instead of the daemon's (stewardd audit --runtime-endpoint). */
  runtimeEndpoint?: string;
}

/** A finding as the report shows it: its age instead of its mtime, and whether this run released it. */
export type OrphanView = Omit<Finding, 'mtimeMs'> & { ageSeconds: number | null; released: boolean };

export interface AuditReport {
  orphans: OrphanView[];
  runtime: RuntimeInfo;
}

export { DEFAULT_GRACE_MS, DEFAULT_RELEASE_CAP, parseDuration } from './options.js';

/** host-local dataDirs named in a step's plugin config (as the plugin itself, or as its ipam). */
export function hostLocalDataDirs(config: string): string[] {
  try {
    const c = JSON.parse(config) as { type?: unknown; dataDir?: unknown; ipam?: { type?: unknown; dataDir?: unknown } };
    const out: string[] = [];
    if (c.ipam?.type === 'host-local' && typeof c.ipam.dataDir === 'string') out.push(c.ipam.dataDir);
    if (c.type === 'host-local' && typeof c.dataDir === 'string') out.push(c.dataDir);
    return out;
  } catch {
    return [];
  }
}

/** The host-local config a DEL of an unjournalled lease is given: its network and dataDir. */
export function hostLocalDelConfig(f: Finding): Record<string, unknown> {
  // host-local refuses a config without ranges; a DEL releases by container id and ifname across the
  // network's directory, so any range holding the lease's IP serves: its /24 (IPv4) or /64 (IPv6).
  const subnet =
    f.ip !== null && isIPv4(f.ip) ? `${f.ip.split('.').slice(0, 3).join('.')}.0/24` : `${v6Prefix64(f.ip)}::/64`;
  return {
    cniVersion: '0.4.0',
    name: f.network,
    type: 'host-local',
    ipam: { type: 'host-local', dataDir: dirname(dirname(f.path)), ranges: [[{ subnet }]] },
  };
}

/** The first 64 bits of an IPv6 address, as host-local expects a /64 network written. */
function v6Prefix64(ip: string | null): string {
  const [head = '', tail = ''] = (ip ?? '::').split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === '' ? [] : tail.split(':');
  const groups = ip?.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups
    .slice(0, 4)
    .map((g) => g || '0')
    .join(':');
}

export async function runAudit(deps: AuditDeps, opts: AuditOptions): Promise<AuditReport> {
  const now = deps.now ?? Date.now;
  const live = [
    ...deps.journal.attachmentsInState('adding'),
    ...deps.journal.attachmentsInState('added'),
    ...deps.journal.attachmentsInState('deleting'),
  ];
  const journalled = new Set(live.map((a) => a.containerId));
  const inFlight = new Set(deps.journal.attachmentsInState('adding').map((a) => a.containerId));
  const dataDirs = new Set(deps.leaseDirs);
  for (const a of live)
    for (const s of deps.journal.stepsOf(a.id)) for (const d of hostLocalDataDirs(s.config)) dataDirs.add(d);

  const findings: Finding[] = [];
  for (const a of live) {
    if (a.state === 'adding') continue; // in flight: never a finding
    findings.push({
      kind: 'attachment',
      containerId: a.containerId,
      network: a.network,
      ifname: a.ifname,
      ip: null,
      path: `attachment/${a.id}`,
      mtimeMs: a.updatedAt,
      journalled: true,
    });
  }
  const skipped = (dir: string, err: Error) =>
    deps.log.warn({ dir, err: err.message }, "audit: host-local's lock of a network not had; its leases skipped");
  for (const dir of [...dataDirs].sort())
    findings.push(...(await scanLeases(dir, journalled, deps.lockNetwork, skipped)));
  findings.push(...(await scanCache(deps.cacheDir, journalled)));
  findings.push(...(await scanPortmap(deps, journalled, findings, now())));

  // The journal read again after the scans: a container whose ADD began while they ran (its lease or
  // cache file was scanned, its attachment is newer than the first read) is starting, not an orphan.
  const guard = sandboxGuard(deps, journalled, findings);
  for (const id of guard.startedSince()) inFlight.add(id);
  const sandboxes = await deps.listSandboxes();
  const decisions = decide({
    findings,
    alive: sandboxes === null ? null : new Set(sandboxes),
    inFlight,
    netnsPresent: guard.netnsPresent(),
    nowMs: now(),
    graceMs: opts.graceMs,
    cap: opts.cap ?? DEFAULT_RELEASE_CAP,
    release: opts.release,
  });

  // What its owner's own DEL freed while the pass ran (scanned before the DEL finished, unlisted after
  // RemovePodSandbox) is not reported: a pass during pod churn would list it otherwise.
  const owingNow = owingTeardown(deps.journal);
  const stillHeld = (f: Finding): boolean =>
    f.kind === 'attachment'
      ? owingNow.has(Number(f.path.slice('attachment/'.length)))
      : f.kind === 'portmap' || existsSync(f.path);

  const pass: PassState = { runtimeLost: false, tornDown: new Map(), unmapped: new Set() };
  const orphans: OrphanView[] = [];
  for (const d of decisions) {
    if (!d.orphan || !stillHeld(d.finding)) continue;
    const released = d.verdict === 'release' ? await release(deps, d, live, guard, pass) : false;
    orphans.push({ ...view(d), released });
  }
  // A runtime lost mid-pass: the orphans were decided against its answer, the rest only reported.
  return { orphans, runtime: pass.runtimeLost ? { ...deps.runtime(), lostDuringPass: true } : deps.runtime() };
}

/**
 * portmap's rules from both nat tables, each aged by its container's oldest file evidence, else by
 * when first seen (exported for its unit test).
 */
export async function scanPortmap(
  deps: Pick<AuditDeps, 'readNat' | 'portmapNetworks' | 'firstSeen' | 'log'>,
  journalled: ReadonlySet<string>,
  files: readonly Finding[],
  nowMs: number,
): Promise<Finding[]> {
  if (deps.readNat === undefined) return [];
  const rules = [];
  const unread = new Set<Family>();
  for (const family of ['iptables', 'ip6tables'] as const) {
    try {
      const only = deps.portmapNetworks ?? [];
      const found = parsePortmapRules(family, await deps.readNat(family));
      rules.push(...(only.length === 0 ? found : found.filter((r) => only.includes(r.network))));
    } catch (e) {
      unread.add(family);
      deps.log.warn({ family, err: (e as Error).message }, "audit: cannot read the nat table; portmap's rules skipped");
    }
  }
  const oldest = new Map<string, number>();
  for (const f of files) {
    if ((f.kind !== 'lease' && f.kind !== 'cache') || f.mtimeMs === null) continue;
    oldest.set(f.containerId, Math.min(f.mtimeMs, oldest.get(f.containerId) ?? Infinity));
  }
  const firstSeen = deps.firstSeen ?? new Map<string, number>();
  const current = new Set<string>();
  const out = portmapFindings(rules, journalled, (id, path) => {
    const key = `${path}\0${id}`;
    current.add(key);
    if (!firstSeen.has(key)) firstSeen.set(key, nowMs);
    return oldest.get(id) ?? (firstSeen.get(key) as number);
  });
  // A rule not seen this pass is gone, unless its table could not be read: then it keeps its age.
  for (const key of firstSeen.keys())
    if (!current.has(key) && !unread.has(key.split(' ', 1)[0] as Family)) firstSeen.delete(key);
  return out;
}

/** What a report and a release's log line say of one finding. */
function view(d: Decision): Omit<OrphanView, 'released'> {
  const f = d.finding;
  return {
    kind: f.kind,
    containerId: f.containerId,
    network: f.network,
    ifname: f.ifname,
    ip: f.ip,
    path: f.path,
    ageSeconds: d.ageSeconds,
    journalled: f.journalled,
  };
}

/**
 * What keeps a sandbox the runtime does not list from being taken for dead: an ADD the journal saw
 * begin after its first read, and a network namespace that still exists (containerd lists a sandbox
 * only once its network is set up, its container created and its task started; the namespace exists
 * from before the ADD until StopPodSandbox has torn the network down). Namespaces come from the
 * journal's attachments and from libcni cache entries that record one.
 */
function sandboxGuard(deps: AuditDeps, known: ReadonlySet<string>, findings: readonly Finding[]) {
  const netnsOf = new Map<string, Set<string>>();
  const note = (id: string, netns: string | undefined) => {
    if (netns === undefined || netns === '') return;
    let set = netnsOf.get(id);
    if (set === undefined) netnsOf.set(id, (set = new Set()));
    set.add(netns);
  };
  const read = () => {
    const now = [
      ...deps.journal.attachmentsInState('adding'),
      ...deps.journal.attachmentsInState('added'),
      ...deps.journal.attachmentsInState('deleting'),
    ];
    for (const a of now) note(a.containerId, a.netns);
    return now;
  };
  for (const f of findings) note(f.containerId, f.netns);
  const hasNetns = (id: string) => [...(netnsOf.get(id) ?? [])].some((p) => existsSync(p));
  return {
    /** Containers in flight now, or journalled since the first read. */
    startedSince: (): Set<string> =>
      new Set(
        read()
          .filter((a) => a.state === 'adding' || !known.has(a.containerId))
          .map((a) => a.containerId),
      ),
    netnsPresent: (): Set<string> => new Set([...netnsOf.keys()].filter(hasNetns)),
    /** Whether the container is still dead-looking right before a release. */
    stillDead: (id: string): boolean => {
      const starting = read().some((a) => a.containerId === id && (a.state === 'adding' || !known.has(id)));
      return !starting && !hasNetns(id);
    },
  };
}

/** Ids of the attachments that owe a teardown now (added, or with steps still deleting), read afresh. */
function owingTeardown(journal: AuditDeps['journal']): Set<number> {
  return new Set([...journal.attachmentsInState('added'), ...journal.attachmentsInState('deleting')].map((a) => a.id));
}

/** What one pass's releases learn as they go. */
interface PassState {
  /** The runtime stopped answering a re-ask: no more releases (nor asks, each up to its deadline) this pass. */
  runtimeLost: boolean;
  /** Journalled containers this pass tore down: true once done, false if their teardown failed. */
  tornDown: Map<string, boolean>;
  /** network + container id whose portmap DEL this pass ran (it removes both families' chains). */
  unmapped: Set<string>;
}

async function release(
  deps: AuditDeps,
  d: Decision,
  live: Attachment[],
  guard: ReturnType<typeof sandboxGuard>,
  pass: PassState,
): Promise<boolean> {
  const f = d.finding;
  const { tornDown, unmapped } = pass;
  const mapKey = `${f.network}\0${f.containerId}`;
  // Already freed (or failed) by this pass's action for another finding of the same container: its
  // teardown, or the portmap DEL that removed both families. Nothing more to ask or do.
  const earlier =
    f.journalled && f.kind !== 'cache'
      ? tornDown.get(f.containerId)
      : f.kind === 'portmap' && unmapped.has(mapKey)
        ? true
        : undefined;
  if (earlier !== undefined) {
    if (earlier) deps.log.warn({ ...view(d), by: 'an earlier release of its container in this pass' }, RELEASED);
    return earlier;
  }
  if (pass.runtimeLost) return false;
  // Asked again right before acting: a sandbox that appeared meanwhile keeps what it holds, and so
  // does one whose ADD began or whose network namespace is back.
  const again = await deps.listSandboxes();
  if (again === null) {
    pass.runtimeLost = true;
    deps.log.warn({ runtime: deps.runtime() }, 'audit: the runtime stopped answering; no more releases this pass');
    return false;
  }
  if (again.includes(f.containerId) || !guard.stillDead(f.containerId)) return false;
  const evidence = { ...view(d), runtimeSandboxes: again.length };
  try {
    if (f.journalled && f.kind !== 'cache') {
      // Steward holds it: its own DEL path, once per container, frees the lease with everything else.
      // Only what still owes a teardown now: the runtime's own DEL may have finished it meanwhile.
      const owing = owingTeardown(deps.journal);
      const targets = live.filter((x) => x.containerId === f.containerId && owing.has(x.id));
      if (targets.length === 0) return false;
      tornDown.set(f.containerId, false);
      for (const a of targets) {
        const out = await deps.teardown(a.id);
        if (!out.done) throw out.error ?? new Error('teardown unfinished');
      }
      tornDown.set(f.containerId, true);
    } else if (f.kind === 'lease') {
      if (!existsSync(f.path)) return false; // freed meanwhile by its owner's own DEL
      await deps.run({
        command: 'DEL',
        type: 'host-local',
        containerId: f.containerId,
        netns: '',
        ifname: f.ifname === '' ? 'eth0' : f.ifname,
        args: '',
        cniPath: deps.cniPath ?? '',
        stdin: hostLocalDelConfig(f),
      });
    } else if (f.kind === 'portmap') {
      // One DEL per network and container removes its chain in both families, with every jump to it.
      await deps.run({
        command: 'DEL',
        type: 'portmap',
        containerId: f.containerId,
        netns: '',
        ifname: 'eth0',
        args: '',
        cniPath: deps.cniPath ?? '',
        stdin: portmapDelConfig(f.network),
      });
      unmapped.add(mapKey);
    } else if (f.kind === 'cache') {
      if (!existsSync(f.path)) return false; // removed meanwhile by libcni on its owner's DEL
      await unlink(f.path);
    } else {
      return false;
    }
  } catch (e) {
    deps.log.warn({ ...evidence, err: (e as Error).message }, 'audit: release failed');
    return false;
  }
  deps.log.warn(evidence, RELEASED);
  return true;
}

const RELEASED = 'audit: released an orphan: its sandbox is not listed by the runtime';
