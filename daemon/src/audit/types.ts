// The audit pass's inputs and outputs: what it is given (the journal, the runtime, the node's files
// and tools), what it is asked, and what it reports.

import type { Logger } from 'pino';
import type { PluginRunner } from '../plugins/executor.js';
import type { MasqueradeRelease } from '../engine/masquerade.js';
import type { Attachment, Step } from '../store/types.js';
import type { Finding, Verdict } from './decide.js';
import type { NetworkLock } from './leases.js';
import type { NodeAddresses } from './node-addresses.js';
import type { Family } from './portmap.js';
import type { RuntimeInfo } from './runtime.js';

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
   * and masquerade chains are not scanned. A family whose read fails is logged and skipped.
   */
  readNat?: (family: Family) => Promise<string>;
  /**
   * When this daemon first saw each nat rule (portmap's, a masquerade chain; by path and container id),
   * kept across passes: a rule has no timestamp, and one whose container left no lease or cache file ages from here.
   */
  firstSeen?: Map<string, number>;
  /**
   * Removes a masquerade chain and the POSTROUTING jumps to it, both families (engine/masquerade.ts);
   * absent: such chains are reported, and a release of one fails.
   */
  releaseMasquerade?: MasqueradeRelease;
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
export type OrphanView = Omit<Finding, 'mtimeMs'> & {
  ageSeconds: number | null;
  /** decide.ts's verdict, and why it was (or was not) released: the verdict's meaning, or what stopped its release. */
  verdict: Verdict;
  released: boolean;
  reason: string;
};

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

export { DEFAULT_GRACE_MS, DEFAULT_RELEASE_CAP, parseDuration } from './options.js';
