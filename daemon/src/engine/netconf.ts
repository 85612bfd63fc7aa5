// Parsing and validating the steward netconf a runtime passes on stdin, and normalising its
// delegates into plugin chains. Shape is checked with a JSON Schema (ajv); names, types and
// versions with the shared CNI validators. Every failure is a CniError with the spec's code.

import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import {
  CniError,
  ErrorCode,
  checkIfName,
  checkNetworkName,
  checkPluginType,
  clip,
  isSupportedVersion,
  MAX_NETWORK_NAME_LENGTH,
  SUPPORTED_VERSIONS,
  type PluginConf,
} from '@cni-steward/shared';

/** One delegate network, normalised to a chain of plugin configs. */
export interface Delegate {
  index: number;
  name: string;
  cniVersion: string;
  ifname: string;
  /** Whether the delegate names its own ifname; else the first takes the runtime's CNI_IFNAME. */
  ownIfname: boolean;
  plugins: PluginConf[];
  disableCheck: boolean;
  disableGC: boolean;
}

export interface StewardConf {
  cniVersion: string;
  name: string;
  delegates: Delegate[];
  runtimeConfig: Record<string, unknown>;
  disableGC: boolean;
  /** The raw netconf as received, stored for teardown. */
  raw: Record<string, unknown>;
}

const pluginSchema = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', minLength: 1 },
    capabilities: { type: 'object', additionalProperties: { type: 'boolean' } },
  },
} as const;

/** At most this many delegates in one steward netconf (issue 19: 1,000 took 87 s per ADD); code 7 beyond. */
export const MAX_DELEGATES = 32;
/** At most this many plugins in one delegate's chain; code 7 beyond. */
export const MAX_PLUGINS_PER_DELEGATE = 16;

const delegateSchema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1 },
    cniVersion: { type: 'string' },
    ifname: { type: 'string' },
    plugins: { type: 'array', minItems: 1, maxItems: MAX_PLUGINS_PER_DELEGATE, items: pluginSchema },
    type: { type: 'string', minLength: 1 },
    disableCheck: { type: 'boolean' },
    disableGC: { type: 'boolean' },
  },
  oneOf: [
    { required: ['plugins'], not: { required: ['type'] } },
    { required: ['type'], not: { required: ['plugins'] } },
  ],
} as const;

const stewardSchema = {
  type: 'object',
  required: ['cniVersion', 'name', 'delegates'],
  properties: {
    cniVersion: { type: 'string' },
    name: { type: 'string', minLength: 1 },
    type: { type: 'string' },
    socket: { type: 'string', minLength: 1 },
    spoolDir: { type: 'string', pattern: '^/' },
    delegates: { type: 'array', minItems: 1, maxItems: MAX_DELEGATES, items: delegateSchema },
    timeouts: { type: 'object' },
    runtimeConfig: { type: 'object' },
    disableGC: { type: 'boolean' },
  },
} as const;

const ajv = new Ajv({ allErrors: true, strict: false });
const validateShape = ajv.compile(stewardSchema);

function describe(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .filter((e) => e.keyword !== 'if')
    .map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`)
    .slice(0, 8)
    .join('; ');
}

/** The version gate is separate from shape so an unsupported version gets code 1, not 7. */
export function parseStewardConf(config: unknown, fallbackIfname: string): StewardConf {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new CniError(ErrorCode.InvalidConfig, 'netconf must be a JSON object');
  }
  const raw = config as Record<string, unknown>;
  if (typeof raw.cniVersion === 'string' && !isSupportedVersion(raw.cniVersion)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `cniVersion "${shown(raw.cniVersion)}" is not supported`,
      `supported: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  if (!validateShape(raw)) {
    throw new CniError(ErrorCode.InvalidConfig, `invalid steward netconf: ${describe(validateShape.errors)}`);
  }
  const name = raw.name as string;
  const nameWhy = checkNetworkName(name);
  if (nameWhy) throw new CniError(ErrorCode.InvalidConfig, `network name "${shown(name)}" ${nameWhy}`);
  const cniVersion = raw.cniVersion as string;

  const delegates = (raw.delegates as Record<string, unknown>[]).map((d, index) =>
    toDelegate(d, index, cniVersion, fallbackIfname),
  );
  const seen = new Set<string>();
  for (const d of delegates) {
    if (seen.has(d.ifname))
      throw new CniError(ErrorCode.InvalidConfig, `two delegates use interface "${shown(d.ifname)}"`);
    seen.add(d.ifname);
  }
  return {
    cniVersion,
    name,
    delegates,
    runtimeConfig: (raw.runtimeConfig as Record<string, unknown> | undefined) ?? {},
    disableGC: raw.disableGC === true,
    raw,
  };
}

function toDelegate(d: Record<string, unknown>, index: number, outerVersion: string, fallbackIfname: string): Delegate {
  const name = d.name as string;
  const where = `delegate ${index} ("${shown(name)}")`;
  const nameWhy = checkNetworkName(name);
  if (nameWhy) throw new CniError(ErrorCode.InvalidConfig, `${where}: name ${nameWhy}`);
  const cniVersion = typeof d.cniVersion === 'string' ? d.cniVersion : outerVersion;
  if (!isSupportedVersion(cniVersion)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `${where}: cniVersion "${shown(cniVersion)}" is not supported`,
      `supported: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  // The first delegate takes the runtime's interface; later ones net1, net2, ... unless named.
  const ifname = typeof d.ifname === 'string' ? d.ifname : index === 0 ? fallbackIfname : `net${index}`;
  const ifWhy = checkIfName(ifname);
  if (ifWhy) throw new CniError(ErrorCode.InvalidConfig, `${where}: ifname "${shown(ifname)}" ${ifWhy}`);

  let plugins: PluginConf[];
  if (Array.isArray(d.plugins)) {
    plugins = d.plugins as PluginConf[];
  } else {
    // A single .conf: the whole object is the one plugin's config.
    const { ifname: _ifname, ...single } = d;
    plugins = [single as PluginConf];
  }
  for (const [i, p] of plugins.entries()) {
    const why = checkPluginType(p.type);
    if (why)
      throw new CniError(ErrorCode.InvalidConfig, `${where} plugin ${i}: type "${shown(String(p.type))}" ${why}`);
  }
  return {
    index,
    name,
    cniVersion,
    ifname,
    ownIfname: typeof d.ifname === 'string',
    plugins,
    disableCheck: d.disableCheck === true,
    disableGC: d.disableGC === true,
  };
}

/**
 * The stdin one plugin receives, as libcni builds it: the plugin's own config with the network's
 * name and cniVersion, runtimeConfig filtered to the capabilities it declares, and prevResult.
 */
export function pluginStdin(
  d: Delegate,
  plugin: PluginConf,
  runtimeConfig: Record<string, unknown>,
): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin, name: d.name, cniVersion: d.cniVersion };
  delete conf.prevResult;
  delete conf.runtimeConfig;
  const caps = plugin.capabilities ?? {};
  const rc: Record<string, unknown> = {};
  for (const [cap, enabled] of Object.entries(caps)) {
    if (enabled && Object.hasOwn(runtimeConfig, cap)) rc[cap] = runtimeConfig[cap];
  }
  if (Object.keys(rc).length > 0) conf.runtimeConfig = rc;
  return conf;
}

/**
 * The netconf of an ADD, CHECK, GC or STATUS: parseStewardConf, and a delegate plugin that is
 * steward itself refused (7). DEL parses alone (it stays lenient: a DEL is never refused for its
 * netconf). A steward delegate's call would reach this daemon again and wait behind the one that ran
 * it: an ADD or CHECK in the container's queue, a GC at the node-wide gate (holding every ADD and DEL
 * of the node), a STATUS for the pass in flight, each until its bound (found by a hostile review;
 * `stewardd install` refuses such a primary already).
 */
export function parseServedConf(config: unknown, fallbackIfname: string): StewardConf {
  const conf = parseStewardConf(config, fallbackIfname);
  for (const d of conf.delegates)
    for (const [i, p] of d.plugins.entries())
      if (p.type === SELF_TYPE)
        throw new CniError(
          ErrorCode.InvalidConfig,
          `delegate ${d.name} plugin ${i}: type "${SELF_TYPE}" is steward itself; a delegate names the plugins steward runs`,
        );
  return conf;
}

/**
 * ADD and CHECK: interface names no ADD can make. A delegate's own "ifname" with "%" refused (7):
 * the kernel reads "%" as a name template, so the ADD would make eth0 of "eth%d", and every later
 * DEL of "eth%d" would miss it (CNI_IFNAME with one never gets here: refused, 4, when the environment
 * is read, shared/src/cni/env.ts). And "lo", CNI_IFNAME (4) or a delegate's own (7): every network
 * namespace has its loopback, so the ADD fails "already exists" and its rollback DEL "failed to
 * delete lo: operation not supported" at every retry, about 3.5 hours, an abandoned step at the end,
 * the container's next ADD answered 11 meanwhile (hostile probe, 3 Dec); but for a delegate of the
 * loopback plugin, whose interface it is. DEL is let through, and so
 * are GC and STATUS, which make no interface (a GC refused would leave the network's stale attachments).
 */
export function refuseUnmakeableIfnames(conf: StewardConf): void {
  for (const d of conf.delegates) {
    if (d.ifname.includes('%'))
      throw new CniError(
        ErrorCode.InvalidConfig,
        `delegate ${d.index} ("${shown(d.name)}"): ifname "${shown(d.ifname)}" must not contain "%": the kernel reads it as a name template (eth%d becomes eth0)`,
      );
    if (d.ifname === LOOPBACK && d.plugins[0]?.type !== 'loopback')
      throw d.ownIfname
        ? new CniError(ErrorCode.InvalidConfig, `delegate ${d.index} ("${shown(d.name)}"): ifname "lo" ${LOOPBACK_WHY}`)
        : new CniError(ErrorCode.InvalidEnv, `CNI_IFNAME "lo" ${LOOPBACK_WHY}`);
  }
}

const LOOPBACK = 'lo';
const LOOPBACK_WHY =
  'is the loopback every network namespace has; a plugin cannot make it, and its DEL cannot delete it';

/**
 * ADD: a network name, steward's own or a delegate's, longer than MAX_NETWORK_NAME_LENGTH refused
 * (7): it becomes a file name (shared/src/cni/validate.ts). So is a host-local lease directory that
 * cannot be a path (`<dataDir>/<name>` with a part over NAME_MAX, or over PATH_MAX whole): its ADD
 * and every rollback DEL failed "file name too long", an abandoned step for nothing. Only ADD, so a
 * name accepted before the bound still gets its DEL, CHECK, GC and STATUS (a STATUS refused would
 * make the node NotReady).
 */
export function refuseLongNames(conf: StewardConf): void {
  const names = [
    { what: 'network name', name: conf.name },
    ...conf.delegates.map((d) => ({ what: `delegate ${d.index}: name`, name: d.name })),
  ];
  for (const { what, name } of names)
    if (name.length > MAX_NETWORK_NAME_LENGTH)
      throw new CniError(
        ErrorCode.InvalidConfig,
        `${what} "${shown(name)}" is ${name.length} characters long; an ADD accepts at most ${MAX_NETWORK_NAME_LENGTH}: a network's name becomes a file name (host-local's lease directory, the runtime's cache file)`,
      );
  for (const d of conf.delegates)
    for (const [i, plugin] of d.plugins.entries()) {
      const dir = hostLocalDir(plugin, d.name);
      const why = dir === undefined ? undefined : unusablePath(dir);
      if (why)
        throw new CniError(
          ErrorCode.InvalidConfig,
          `delegate ${d.index} plugin ${i}: host-local's lease directory "${shown(dir as string)}" ${why}`,
        );
    }
}

/** host-local's own default (plugins/ipam/host-local/backend/disk). */
const HOST_LOCAL_DATA_DIR = '/var/lib/cni/networks';
const NAME_MAX = 255;
const PATH_MAX = 4096;

/** The directory a plugin's host-local IPAM keeps `network`'s leases in; undefined for other IPAM. */
function hostLocalDir(plugin: PluginConf, network: string): string | undefined {
  const ipam = (plugin as Record<string, unknown>).ipam;
  if (typeof ipam !== 'object' || ipam === null) return undefined;
  const { type, dataDir } = ipam as Record<string, unknown>;
  if (type !== 'host-local') return undefined;
  // Cleaned as Go's filepath.Join, which host-local uses.
  return join(typeof dataDir === 'string' && dataDir !== '' ? dataDir : HOST_LOCAL_DATA_DIR, network);
}

/** Why `path` cannot be made (a part over NAME_MAX bytes, or PATH_MAX with its NUL), or undefined. */
function unusablePath(path: string): string | undefined {
  const long = path.split('/').find((part) => Buffer.byteLength(part) > NAME_MAX);
  if (long !== undefined)
    return `has a part of ${Buffer.byteLength(long)} bytes; a file name holds at most ${NAME_MAX}`;
  const bytes = Buffer.byteLength(path);
  return bytes >= PATH_MAX ? `is ${bytes} bytes long; a path holds at most ${PATH_MAX - 1}` : undefined;
}

/** A value echoed in an error, cut: a 100 KB name must not make the error (and every log of it) that large. */
const shown = (value: string) => clip(value, 200);

/** The plugin type steward is installed as (lifecycle/install.ts SHIM_NAME). */
const SELF_TYPE = 'steward';
