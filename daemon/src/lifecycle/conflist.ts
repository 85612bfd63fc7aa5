// Finding the node's primary network config and rendering 00-steward.conflist around it.
// The primary is what the runtime would load if we were not there: the first config file by
// name (libcni reads .conf, .conflist and .json, in byte order) that is not ours.

import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_NETCONF_BYTES, SUPPORTED_VERSIONS, isSupportedVersion, printableCapped } from '@cni-steward/shared';
import { parseJson } from '../faithful-json.js';
import { FileTooLargeError, readRegularFile } from './files.js';

export const STEWARD_CONFLIST = '00-steward.conflist';
const CONFIG_EXTENSIONS = ['.conf', '.conflist', '.json'];

export type PrimaryScan =
  | { kind: 'none' }
  /** The first candidate exists but cannot be used yet (being written, or not a network config). */
  | { kind: 'invalid'; file: string; why: string }
  | { kind: 'found'; file: string; conf: Record<string, unknown> };

function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Whether a config file of this name is loaded before 00-steward.conflist (libcni: byte order). */
export function sortsBeforeOurs(file: string): boolean {
  return byteOrder(file, STEWARD_CONFLIST) < 0;
}

/** The names of a conf dir's entries that libcni would load, in its order (by bytes). */
function configNames(names: readonly string[]): string[] {
  return names.filter((n) => CONFIG_EXTENSIONS.some((x) => n.endsWith(x))).sort(byteOrder);
}

export function findPrimary(confDir: string): PrimaryScan {
  let names: string[];
  try {
    names = readdirSync(confDir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    throw e;
  }
  // A directory is skipped, as libcni's ConfFiles skips it; anything else named like a config is
  // a candidate (a dotfile too: libcni loads ".05-x.conflist", before ours), and one that is not a
  // regular file is unusable (a FIFO would block its reader).
  const file = configNames(names).find((n) => n !== STEWARD_CONFLIST && !isDirectory(join(confDir, n)));
  if (file === undefined) return { kind: 'none' };
  let conf: unknown;
  try {
    // Parsed as the request path parses a netconf (faithful-json.ts): the primary is written into
    // our conflist again, and JSON.parse would round 9007199254740993 or make 1e400 null there.
    conf = parseJson(readRegularFile(join(confDir, file), MAX_NETCONF_BYTES).toString('utf8'));
  } catch (e) {
    return { kind: 'invalid', file, why: (e as Error).message };
  }
  const why = notANetwork(conf);
  if (why) return { kind: 'invalid', file, why };
  return { kind: 'found', file, conf: conf as Record<string, unknown> };
}

/** The most of a config file configNaming reads; a larger one is taken to name the plugin. */
const NAMING_READ_MAX = 16 * 1024 * 1024;

/**
 * The first config file (as libcni lists them) in `dirs`, other than those in `skip`, that names a
 * plugin of type `type` anywhere in it (a Multus config's delegates too; the key matched without
 * case, as Go's encoding/json matches it), as "DIR/FILE", or undefined. A file that is no regular
 * file or does not parse names nothing (the runtime cannot load it either); one too large to read
 * is taken to name it.
 */
export function configNaming(
  dirs: readonly string[],
  type: string,
  skip: ReadonlySet<string> = new Set(),
): string | undefined {
  for (const dir of dirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const n of configNames(names)) {
      const path = join(dir, n);
      if (skip.has(path)) continue;
      let conf: unknown;
      try {
        conf = JSON.parse(readRegularFile(path, NAMING_READ_MAX).toString('utf8'));
      } catch (e) {
        if (e instanceof FileTooLargeError) return path;
        continue;
      }
      if (namesType(conf, type, 0)) return path;
    }
  }
  return undefined;
}

/** Whether the config file at `path` names plugin `type` anywhere in it (one too large to read counts as naming it). */
export function fileNamesType(path: string, type: string): boolean {
  try {
    return namesType(JSON.parse(readRegularFile(path, NAMING_READ_MAX).toString('utf8')), type, 0);
  } catch (e) {
    return e instanceof FileTooLargeError;
  }
}

/** One entry of a conflist's "plugins": what the readers here look at (anything else is left as read). */
export type ConflistEntry = { type?: unknown; socket?: unknown } | null;

/**
 * The plugins of the conflist at `path` when its first plugin is steward's (our config, perhaps with
 * plugins appended after ours), else undefined. Throws what reading or parsing it throws (ENOENT, a
 * file too large, bad JSON): each caller says that its own way.
 */
export function stewardConflistPlugins(path: string, maxBytes?: number): ConflistEntry[] | undefined {
  const conf = JSON.parse(readRegularFile(path, maxBytes).toString('utf8')) as { plugins?: unknown } | null;
  if (!Array.isArray(conf?.plugins)) return undefined;
  const plugins = conf.plugins as ConflistEntry[];
  return plugins[0]?.type === 'steward' ? plugins : undefined;
}

function namesType(v: unknown, type: string, depth: number): boolean {
  if (typeof v !== 'object' || v === null || depth > 64) return false;
  if (Array.isArray(v)) return v.some((x) => namesType(x, type, depth + 1));
  return Object.entries(v).some(
    ([k, x]) => (k.toLowerCase() === 'type' && x === type) || namesType(x, type, depth + 1),
  );
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false; // gone, or a dangling link: a candidate that will not read
  }
}

function notANetwork(conf: unknown): string | undefined {
  if (typeof conf !== 'object' || conf === null || Array.isArray(conf)) return 'not a JSON object';
  const c = conf as Record<string, unknown>;
  if (typeof c.name !== 'string' || c.name === '') return 'has no "name"';
  if (typeof c.cniVersion !== 'string') return 'has no "cniVersion"';
  // stewardd runs its delegates at their own version: one it cannot run would fail every ADD
  // through steward, where the runtime runs it without steward (bridge takes 0.2.0).
  if (!isSupportedVersion(c.cniVersion))
    return `has cniVersion ${JSON.stringify(printableCapped(c.cniVersion, 40))}, which stewardd cannot run its plugins at (${SUPPORTED_VERSIONS.join(', ')}); the runtime runs it without steward`;
  if (Array.isArray(c.plugins)) {
    if (c.plugins.length === 0) return '"plugins" is empty';
    if (c.plugins.some((p) => (p as { type?: unknown })?.type === 'steward')) return 'is a steward config itself';
    return undefined;
  }
  if (typeof c.type !== 'string') return 'has neither "plugins" nor "type"';
  if (c.type === 'steward') return 'is a steward config itself';
  return undefined;
}

/** Union of the capabilities the primary's plugins declare, so the runtime passes their runtimeConfig to us. */
export function capabilitiesOf(primary: Record<string, unknown>): Record<string, boolean> {
  const plugins = Array.isArray(primary.plugins) ? (primary.plugins as Record<string, unknown>[]) : [primary];
  const caps: Record<string, boolean> = {};
  for (const p of plugins) {
    const c = p.capabilities;
    if (typeof c !== 'object' || c === null) continue;
    for (const [k, v] of Object.entries(c as Record<string, unknown>)) if (v === true) caps[k] = true;
  }
  return Object.fromEntries(Object.entries(caps).sort(([a], [b]) => byteOrder(a, b)));
}

export interface RenderOptions {
  socket: string;
  spoolDir: string;
  /** steward's own cniVersion (cni-version.ts); absent: the primary's. */
  cniVersion?: string;
}

/** The file's bytes: deterministic, so unchanged inputs give an unchanged file. */
export function renderConflist(primary: Record<string, unknown>, o: RenderOptions): string {
  const caps = capabilitiesOf(primary);
  const entry: Record<string, unknown> = { type: 'steward', socket: o.socket, spoolDir: o.spoolDir };
  if (Object.keys(caps).length > 0) entry.capabilities = caps;
  entry.delegates = [primary];
  const conflist = { cniVersion: o.cniVersion ?? primary.cniVersion, name: 'steward', plugins: [entry] };
  return `${JSON.stringify(conflist, null, 2)}\n`;
}
