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
import { decide, findingKey, runtimeDistrust, type Decision, type Finding } from './decide.js';
import { storedResultAddresses, type NodeAddresses } from './node-addresses.js';
import type { RuntimeInfo } from './runtime.js';
import { scanLeases, type NetworkLock } from './leases.js';
import { DEFAULT_PASS_DEADLINE_MS, DEFAULT_RELEASE_CAP } from './options.js';
import { parsePortmapRules, portmapDelConfig, portmapFindings, type Family } from './portmap.js';

export type { RuntimeInfo } from './runtime.js';

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
  /**
   * Every address on an interface of any network namespace on the node (node-addresses.ts), given
   * the directories of bind-mounted namespaces to read too; absent: no proof, so only passes the
   * grace apart release.
   */
  nodeAddresses?: (netnsDirs: string[]) => Promise<NodeAddresses>;
  /** When each finding was first found orphaned, kept across passes and restarts (store/); absent: memory. */
  sightings?: { load(): Map<string, number>; save(sightings: ReadonlyMap<string, number>): void };
  log: Logger;
  now?: () => number;
}

export interface AuditOptions {
  release: boolean;
  graceMs: number;
  cap?: number;
  /** At most this fraction of one network's leases released (decide.ts; default 0.5, at least 10). */
  capFraction?: number;
  /** No release starts later than this many ms after the pass began (default DEFAULT_PASS_DEADLINE_MS). */
  deadlineMs?: number;
  /** This pass asks the CRI runtime on this socket instead of the daemon's (stewardd audit --runtime-endpoint). */
  runtimeEndpoint?: string;
}

/** A finding as the report shows it: its age instead of its mtime, and whether this run released it. */
export type OrphanView = Omit<Finding, 'mtimeMs'> & { ageSeconds: number | null; released: boolean };

export interface AuditReport {
  orphans: OrphanView[];
  runtime: RuntimeInfo;
  /** Why nothing was released this pass although asked to (a runtime not trusted, or lost). */
  reportOnly?: string;
  /** The pass reached its deadline before its releases were done: what is left waits for the next pass. */
  deadlineReached?: boolean;
  /** The node's proof: namespaces read, and those that could not be (then only sightings release). */
  node?: { namespaces: number; unread: string[] } | { error: string };
}

/** Releases between two asks of the runtime (and reads of the journal). */
export const RELEASE_BATCH = 32;

/** Where runtimes keep bind-mounted network namespaces (containerd, CRI-O, podman, ip netns). */
export const NETNS_DIRS = ['/run/netns', '/var/run/netns'] as const;

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
  const deadline = now() + (opts.deadlineMs ?? DEFAULT_PASS_DEADLINE_MS);
  const live = [
    ...deps.journal.attachmentsInState('adding'),
    ...deps.journal.attachmentsInState('added'),
    ...deps.journal.attachmentsInState('deleting'),
  ];
  const journalled = new Set(live.map((a) => a.containerId));
  const inFlight = new Set(deps.journal.attachmentsInState('adding').map((a) => a.containerId));
  const findings = await gather(deps, live, journalled, now());

  // The journal read again after the scans: a container whose ADD began while they ran (its lease or
  // cache file was scanned, its attachment is newer than the first read) is starting, not an orphan.
  const guard = sandboxGuard(deps, journalled, findings);
  for (const id of guard.startedSince()) inFlight.add(id);
  const node = await nodeProof(deps, live, findings);
  const sandboxes = await deps.listSandboxes();
  const distrust = sandboxes === null ? undefined : runtimeDistrust(sandboxes, guard.withNetns());
  if (distrust !== undefined) deps.log.warn({ reason: distrust, runtime: deps.runtime() }, DISTRUSTED);
  const sightings = deps.sightings?.load() ?? new Map<string, number>();
  const decisions = decide({
    findings,
    alive: sandboxes === null ? null : new Set(sandboxes),
    inFlight,
    netnsPresent: guard.netnsPresent(),
    nodeAddresses: 'addresses' in node ? { addresses: node.addresses, complete: node.unread.length === 0 } : null,
    addressOwners: leaseOwners(findings),
    sightings,
    ...(distrust !== undefined ? { distrust } : {}),
    nowMs: now(),
    graceMs: opts.graceMs,
    cap: opts.cap ?? DEFAULT_RELEASE_CAP,
    ...(opts.capFraction !== undefined ? { capFraction: opts.capFraction } : {}),
    release: opts.release,
  });
  if (sandboxes !== null && distrust === undefined) deps.sightings?.save(nextSightings(decisions, sightings, now()));

  // What its owner's own DEL freed while the pass ran (scanned before the DEL finished, unlisted after
  // RemovePodSandbox) is not reported: a pass during pod churn would list it otherwise.
  const owingNow = owingTeardown(deps.journal);
  const stillHeld = (f: Finding): boolean =>
    f.attachmentId !== undefined ? owingNow.has(f.attachmentId) : f.kind === 'portmap' || existsSync(f.path);

  const pass: PassState = {
    runtimeLost: false,
    tornDown: new Map(),
    unmapped: new Set(),
    deadline,
    now,
    batch: { listed: new Set(sandboxes ?? []), size: 0, owing: owingNow, starting: new Set() },
  };
  const orphans: OrphanView[] = [];
  for (const d of decisions) {
    if (!d.orphan || !stillHeld(d.finding)) continue;
    const released = d.verdict === 'release' ? await release(deps, d, live, guard, pass) : false;
    orphans.push({ ...view(d), released });
  }
  const runtime = { ...deps.runtime(), ...(pass.runtimeLost ? { lostDuringPass: true } : {}) };
  const reportOnly = pass.stopped ?? distrust;
  return {
    orphans,
    runtime: distrust !== undefined ? { ...runtime, distrusted: distrust } : runtime,
    ...(reportOnly !== undefined && opts.release ? { reportOnly } : {}),
    ...(pass.deadlineReached ? { deadlineReached: true } : {}),
    node: 'addresses' in node ? { namespaces: node.namespaces, unread: node.unread } : node,
  };
}

const DISTRUSTED = "audit: the runtime's answer contradicts the node; this pass only reports";

/** Everything held on the node, each finding with the addresses it holds. */
async function gather(deps: AuditDeps, live: Attachment[], journalled: Set<string>, nowMs: number): Promise<Finding[]> {
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
      attachmentId: a.id,
      addresses: storedResultAddresses(a.result),
      netns: a.netns,
    });
  }
  const skipped = (dir: string, err: Error) =>
    deps.log.warn({ dir, err: err.message }, "audit: host-local's lock of a network not had; its leases skipped");
  for (const dir of [...dataDirs].sort())
    findings.push(...(await scanLeases(dir, journalled, deps.lockNetwork, skipped)));
  findings.push(...(await scanCache(deps.cacheDir, journalled)));
  findings.push(...(await scanPortmap(deps, journalled, findings, nowMs)));
  return findings;
}

/** address -> the containers host-local's leases give it to. */
function leaseOwners(findings: readonly Finding[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const f of findings) {
    if (f.kind !== 'lease') continue;
    for (const a of f.addresses ?? []) {
      let set = out.get(a);
      if (set === undefined) out.set(a, (set = new Set()));
      set.add(f.containerId);
    }
  }
  return out;
}

/** The node's addresses, reading the runtimes' netns dirs and those the journal and cache name. */
async function nodeProof(
  deps: AuditDeps,
  live: readonly Attachment[],
  findings: readonly Finding[],
): Promise<NodeAddresses | { error: string }> {
  if (deps.nodeAddresses === undefined) return { error: 'not looked for' };
  const dirs = new Set<string>(NETNS_DIRS);
  for (const p of [...live.map((a) => a.netns), ...findings.map((f) => f.netns ?? '')])
    if (p.startsWith('/') && !p.startsWith('/proc/')) dirs.add(dirname(p));
  try {
    const node = await deps.nodeAddresses([...dirs]);
    if (node.unread.length > 0)
      deps.log.warn({ unread: node.unread.slice(0, 10) }, 'audit: network namespaces not read; only sightings release');
    return node;
  } catch (e) {
    deps.log.warn({ err: (e as Error).message }, "audit: the node's addresses not read; only sightings release");
    return { error: (e as Error).message };
  }
}

/**
 * The sightings after this pass: a finding found orphaned keeps its first sighting (or gets this
 * pass's), one found held by somebody or not found at all loses it.
 */
function nextSightings(decisions: readonly Decision[], before: ReadonlyMap<string, number>, nowMs: number) {
  const next = new Map<string, number>();
  for (const d of decisions) {
    if (!d.orphan) continue;
    const key = findingKey(d.finding);
    next.set(key, before.get(key) ?? nowMs);
  }
  return next;
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
  let journalled: Attachment[] = [];
  const read = () => {
    journalled = [
      ...deps.journal.attachmentsInState('adding'),
      ...deps.journal.attachmentsInState('added'),
      ...deps.journal.attachmentsInState('deleting'),
    ];
    for (const a of journalled) note(a.containerId, a.netns);
    return journalled;
  };
  for (const f of findings) note(f.containerId, f.netns);
  const hasNetns = (id: string) => [...(netnsOf.get(id) ?? [])].some((p) => existsSync(p));
  const starting = (a: Attachment) => a.state === 'adding' || !known.has(a.containerId);
  return {
    /** Containers in flight now, or journalled since the first read (reads the journal). */
    startedSince: (): Set<string> =>
      new Set(
        read()
          .filter(starting)
          .map((a) => a.containerId),
      ),
    netnsPresent: (): Set<string> => new Set([...netnsOf.keys()].filter(hasNetns)),
    /** Pods steward set up (added) whose namespace is still there, as of the last journal read. */
    withNetns: (): string[] =>
      journalled.filter((a) => a.state === 'added' && a.netns !== '' && existsSync(a.netns)).map((a) => a.containerId),
    /** Containers starting as of a fresh read of the journal (once per batch of releases). */
    startingNow: (): Set<string> =>
      new Set(
        read()
          .filter(starting)
          .map((a) => a.containerId),
      ),
    hasNetns,
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
  /** No release starts after this (ms since epoch). */
  deadline: number;
  now: () => number;
  deadlineReached?: boolean;
  /** Why the releases stopped before the decisions were done (reported as reportOnly). */
  stopped?: string;
  /**
   * What the current batch of releases acts on: the runtime's answer, the journal as read once for
   * the batch, and how many releases it has made. The first batch uses the pass's own ask.
   */
  batch: { listed: Set<string>; size: number; owing: Set<number>; starting: Set<string> };
}

/**
 * A new batch every RELEASE_BATCH releases: the runtime asked again and the journal read again, once
 * for the batch rather than once per release. False when no more releases may run this pass.
 */
async function nextBatch(deps: AuditDeps, guard: ReturnType<typeof sandboxGuard>, pass: PassState): Promise<boolean> {
  if (pass.runtimeLost || pass.stopped !== undefined) return false;
  if (pass.now() >= pass.deadline) {
    pass.deadlineReached = true;
    pass.stopped = 'the pass reached its deadline; what is left waits for the next pass';
    deps.log.warn('audit: the pass reached its deadline; no more releases this pass');
    return false;
  }
  if (pass.batch.size < RELEASE_BATCH) return true;
  const again = await deps.listSandboxes();
  if (again === null) {
    pass.runtimeLost = true;
    pass.stopped = 'the runtime stopped answering during the pass';
    deps.log.warn({ runtime: deps.runtime() }, 'audit: the runtime stopped answering; no more releases this pass');
    return false;
  }
  const starting = guard.startingNow();
  const distrust = runtimeDistrust(again, guard.withNetns());
  if (distrust !== undefined) {
    pass.stopped = distrust;
    deps.log.warn({ reason: distrust, runtime: deps.runtime() }, DISTRUSTED);
    return false;
  }
  pass.batch = { listed: new Set(again), size: 0, owing: owingTeardown(deps.journal), starting };
  return true;
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
  if (!(await nextBatch(deps, guard, pass))) return false;
  // As of this batch's ask: a sandbox that appeared meanwhile keeps what it holds, and so does one
  // whose ADD began or whose network namespace is back.
  const { batch } = pass;
  if (batch.listed.has(f.containerId) || batch.starting.has(f.containerId) || guard.hasNetns(f.containerId))
    return false;
  batch.size += 1;
  const evidence = { ...view(d), runtimeSandboxes: batch.listed.size };
  try {
    if (f.journalled && f.kind !== 'cache') {
      // Steward holds it: its own DEL path, once per container, frees the lease with everything else.
      // Only what still owes a teardown now: the runtime's own DEL may have finished it meanwhile.
      const targets = live.filter((x) => x.containerId === f.containerId && batch.owing.has(x.id));
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
