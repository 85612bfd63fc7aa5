// Which cniVersion steward's own conflist is written at. libcni asks a network for STATUS and sends
// it GC only from 1.1.0, but libcni before v1.2.0 (containerd 1.7, CRI-O up to 1.30, podman 4) fails
// every ADD on a 1.1.0 conflist ("unsupported CNI result version"). So `auto` asks the runtime what it
// is (CRI Version, through audit/runtime.ts) and writes 1.1.0 only where that runtime both accepts it
// and calls STATUS: containerd from 2.0.1 (go-cni 1.1.11), CRI-O from 1.32 (ocicni 0.4.3). Anything
// else, an unknown runtime, a version it cannot read or no answer: the primary's own version.

import { printableCapped } from '@cni-steward/shared';
import type { RuntimeVersion } from '../audit/runtime.js';

export const CNI_VERSION_MODES = ['auto', 'primary', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export type CniVersionMode = (typeof CNI_VERSION_MODES)[number];

/** How long install waits for the runtime's Version answer. */
export const VERSION_ASK_MS = 2000;
/**
 * How long a daemon that already serves waits for it: nothing waits on the answer (the record's
 * choice stands meanwhile), so a runtime slow to answer on a busy node still gets its version.
 */
export const VERSION_ASK_SERVING_MS = 10_000;

/** The choice, as the install record keeps it and `stewardd status` shows it. */
export interface ConflistVersionChoice {
  mode: CniVersionMode;
  /** The version to write; null: the primary's own. */
  version: string | null;
  /** Why, in an operator's words. */
  reason: string;
  /** What the runtime said it is, when it answered. */
  runtime?: { name: string; version: string; endpoint: string };
  /** Whether the runtime that answered calls STATUS (and GC) on a conflist at 1.1.0 (status tells it with the version written). */
  statusAsked: boolean;
  /** `auto` with more than one runtime socket (manyRuntimes): the sockets found; no runtime was asked. */
  runtimeSockets?: string[];
  /**
   * The runtime asked was the one --runtime-endpoint named: an operator's pick among several sockets
   * (what manyRuntimes' reason tells them to do), which a daemon that only sees several keeps.
   */
  endpointGiven?: true;
}

/** The first version each runtime accepts a 1.1.0 conflist at and calls STATUS on it. */
const STATUS_FROM: Readonly<Record<string, readonly [number, number, number]>> = {
  containerd: [2, 0, 1],
  'cri-o': [1, 32, 0],
};

/**
 * `v2.0.1`, `1.6.20~ds1`, `1.32.0-rc.1` as [major, minor, patch, pre-release?]; undefined when not
 * one. A `-` suffix is a pre-release (semver: before its release); `+build` and Debian's `~ds1` are not.
 */
export function parseRuntimeVersion(raw: string): [number, number, number, boolean] | undefined {
  const m = /^v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})($|[-+~.].*)/.exec(raw.trim());
  if (m === null) return undefined;
  return [Number(m[1]), Number(m[2]), Number(m[3]), (m[4] ?? '').startsWith('-')];
}

/** v >= min, a pre-release of min itself counting as below it (2.0.1-rc.1 is not 2.0.1). */
function atLeast(v: readonly [number, number, number, boolean], min: readonly number[]): boolean {
  for (let i = 0; i < 3; i++) if (v[i] !== (min[i] ?? 0)) return (v[i] as number) > (min[i] ?? 0);
  return !v[3];
}

export function parseCniVersionMode(raw: string): CniVersionMode | undefined {
  return (CNI_VERSION_MODES as readonly string[]).includes(raw) ? (raw as CniVersionMode) : undefined;
}

/** The decision, pure: the mode asked for and what the runtime answered (or why it did not). */
/**
 * The most of a runtime's own words kept (its name, its version, a failed Version's error): they are
 * printed by install, logged, stored in the install record and served in /v1/status, and a runtime
 * can say anything (a 1 MB version string made a 1.8 MB record and a 4.6 MB status answer).
 */
export const MAX_RUNTIME_TEXT = 200;

/** What a runtime said about itself, bounded and escaped (control characters, bidi overrides). */
function bounded<T extends { name: string; version: string } | { error: string }>(answer: T): T {
  const cap = (s: string) => printableCapped(s, MAX_RUNTIME_TEXT);
  return 'error' in answer
    ? { ...answer, error: cap(answer.error) }
    : { ...answer, name: cap(answer.name), version: cap(answer.version) };
}

export function chooseConflistVersion(
  mode: CniVersionMode,
  said: RuntimeVersion | { error: string; endpoint?: string | null } | undefined,
): ConflistVersionChoice {
  const answer = said === undefined ? undefined : bounded(said);
  const runtime = answer !== undefined && 'name' in answer ? answer : undefined;
  const statusAsked = runtime !== undefined && acceptsStatus(runtime);
  const told = runtime !== undefined ? { runtime: { ...runtime } } : {};
  if (mode !== 'auto') {
    const version = mode === 'primary' ? null : mode;
    return { mode, version, reason: 'chosen by hand', statusAsked, ...told };
  }
  if (runtime === undefined) {
    const why = answer !== undefined && 'error' in answer ? answer.error : 'not asked';
    return { mode, version: null, reason: `the runtime did not say what it is (${why})`, statusAsked: false };
  }
  const name = `${runtime.name} ${runtime.version}`;
  if (statusAsked)
    return { mode, version: '1.1.0', reason: `${name} calls STATUS and GC on 1.1.0`, statusAsked, ...told };
  const known = STATUS_FROM[runtime.name] !== undefined;
  const reason = !known
    ? `${name} is not a runtime steward knows the CNI versions of`
    : parseRuntimeVersion(runtime.version) === undefined
      ? `${name}: cannot read its version`
      : `${name} does not ask STATUS`;
  return { mode, version: null, reason, statusAsked: false, ...told };
}

function acceptsStatus(r: RuntimeVersion): boolean {
  const min = STATUS_FROM[r.name];
  const v = parseRuntimeVersion(r.version);
  return min !== undefined && v !== undefined && atLeast(v, min);
}

/** `auto` when more than one runtime reads the conf dir: the primary's version, which both accept. */
export function manyRuntimes(sockets: readonly string[]): ConflistVersionChoice {
  return {
    mode: 'auto',
    version: null,
    reason: `more than one runtime socket exists (${sockets.join(', ')}) and each reads the CNI conf dir: the primary's version, which every runtime accepts (give --runtime-endpoint to choose by one)`,
    statusAsked: false,
    runtimeSockets: [...sockets],
  };
}

/**
 * Whether a daemon at its start rewrites the conflist by `decided`: not when `auto` got no answer
 * from the runtime (that proves nothing: the record's choice, install's, stays); yes for an explicit
 * mode, an answer, or more than one runtime socket (known without asking: the primary's version,
 * which every runtime accepts, as install writes it).
 */
export function appliesAtStart(decided: ConflistVersionChoice): boolean {
  return decided.mode !== 'auto' || decided.runtime !== undefined || decided.runtimeSockets !== undefined;
}

/** The conflist's cniVersion under `choice`, given the primary's. */
export function conflistVersionOf(choice: ConflistVersionChoice | undefined, primaryVersion: string): string {
  return choice?.version ?? primaryVersion;
}

/** One line for `stewardd status`: what was written and whether STATUS reaches steward. */
export function describeChoice(choice: ConflistVersionChoice, written: string | undefined): string {
  const conflist = written === undefined ? 'not written yet' : `conflist ${written}`;
  const who = choice.runtime ? `${choice.runtime.name} ${choice.runtime.version}` : 'runtime unknown';
  const status = choice.statusAsked && written === '1.1.0' ? 'asked by this runtime' : 'not asked by this runtime';
  return `STATUS: ${status} (${conflist}, ${who}; --cni-version ${choice.mode}: ${choice.reason})`;
}
