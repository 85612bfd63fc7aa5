// The only reader of the daemon's command line. Every bad value is reported at once.

import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR } from '@cni-steward/shared';
import type { ApiAccess } from './lifecycle/k8s.js';
import type { InstallConfig, ShimLibc, UninstallConfig, UninstallMode } from './lifecycle/options.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './engine/teardown.js';
import type { DelPolicy } from './engine/engine.js';
import { parseListenAddress, type ListenAddress } from './metrics-listener.js';

export interface DaemonConfig {
  socket: string;
  stateDir: string;
  dbPath: string;
  spoolDir: string;
  binDirs: string[];
  maxParallel: number;
  pluginTimeoutMs: number;
  delPolicy: DelPolicy;
  bootIdFile: string;
  retry: RetryPolicy;
  tombstoneTtlMs: number;
  pruneIntervalMs: number;
  shutdownGraceMs: number;
  logLevel: string;
  cniConfDir: string | undefined;
  /** What SIGTERM does to the node's install (lifecycle/on-term.ts). */
  uninstallOnDelete: UninstallMode;
  /** In-cluster API access; undefined when there is no service-account token. */
  api: ApiAccess | undefined;
  drainTimeoutMs: number;
  /** --metrics-listen: the TCP address serving GET /metrics only; undefined = off. */
  metricsListen: ListenAddress | undefined;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export const RUN_USAGE = `usage: stewardd run [options]
  --socket PATH            Unix socket to serve on (default ${DEFAULT_SOCKET})
  --state-dir DIR          database and spool live here (default ${DEFAULT_STATE_DIR})
  --db PATH                SQLite file (default <state-dir>/steward.db)
  --spool-dir DIR          DELs written by the shim while the daemon was down (default <state-dir>/spool)
  --bin-dir DIR            delegate plugin dir, repeatable; searched before the request's CNI_PATH (default /opt/cni/bin)
  --max-parallel N         concurrent delegate plugin executions (default 8)
  --plugin-timeout SEC     deadline for one plugin execution (default 60)
  --del-policy defer|strict  what a DEL whose teardown failed returns (default defer: success, retried in background)
  --boot-id-file PATH      kernel boot id source (default /proc/sys/kernel/random/boot_id)
  --retry-base-ms MS       first teardown retry delay, doubling (default 1000)
  --retry-max-ms MS        longest teardown retry delay (default 300000)
  --retry-max-attempts N   abandon a teardown step after N failed DELs (default 50)
  --retry-max-age SEC      ...or once it has failed for this long (default 86400)
  --tombstone-ttl SEC      keep finished attachments this long to answer repeated DELs (default 3600)
  --prune-interval SEC     how often finished attachments past the TTL are deleted (default 60)
  --shutdown-grace SEC     on SIGTERM, wait this long for in-flight requests (default 20)
  --cni-conf-dir DIR       watch this CNI conf dir and keep 00-steward.conflist in step with the primary network
  --uninstall-on-delete auto|always|never
                           on SIGTERM, uninstall from the node? auto (default): only if the API server says this
                           pod's DaemonSet is gone or being deleted; never without a service-account token
  --drain-timeout SEC      on uninstall, time given to pending teardowns (default 30)
  --k8s-api URL            API server (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
  --k8s-token-file PATH    (default ${SA_DIR}/token)
  --k8s-ca-file PATH       (default ${SA_DIR}/ca.crt)
  --k8s-timeout SEC        deadline for the API request (default 5)
  --namespace NS           this pod's namespace (default $POD_NAMESPACE)
  --daemonset NAME         this pod's DaemonSet (default $STEWARD_DAEMONSET)
  --metrics-listen ADDR:PORT
                           also serve GET /metrics (only) on this TCP address for Prometheus, e.g. 0.0.0.0:9631;
                           ADDR is an IP address (or empty for all), never a name
                           (default off; the control API stays on the socket)
  --log-level LEVEL        pino level (default info)`;

function int(name: string, raw: string | undefined, fallback: number, min: number, problems: string[]): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    problems.push(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return fallback;
  }
  return n;
}

export function parseRunConfig(argv: string[]): DaemonConfig {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      socket: { type: 'string' },
      'state-dir': { type: 'string' },
      db: { type: 'string' },
      'spool-dir': { type: 'string' },
      'bin-dir': { type: 'string', multiple: true },
      'max-parallel': { type: 'string' },
      'plugin-timeout': { type: 'string' },
      'del-policy': { type: 'string' },
      'boot-id-file': { type: 'string' },
      'retry-base-ms': { type: 'string' },
      'retry-max-ms': { type: 'string' },
      'retry-max-attempts': { type: 'string' },
      'retry-max-age': { type: 'string' },
      'tombstone-ttl': { type: 'string' },
      'prune-interval': { type: 'string' },
      'shutdown-grace': { type: 'string' },
      'cni-conf-dir': { type: 'string' },
      'uninstall-on-delete': { type: 'string' },
      'drain-timeout': { type: 'string' },
      'k8s-api': { type: 'string' },
      'k8s-token-file': { type: 'string' },
      'k8s-ca-file': { type: 'string' },
      'k8s-timeout': { type: 'string' },
      namespace: { type: 'string' },
      daemonset: { type: 'string' },
      'log-level': { type: 'string' },
      'metrics-listen': { type: 'string' },
    },
  });
  const problems: string[] = [];
  const uninstallOnDelete = values['uninstall-on-delete'] ?? 'auto';
  if (!['auto', 'always', 'never'].includes(uninstallOnDelete)) {
    problems.push(`--uninstall-on-delete must be auto, always or never, got "${uninstallOnDelete}"`);
  }
  const stateDir = resolve(values['state-dir'] ?? DEFAULT_STATE_DIR);
  const delPolicy = values['del-policy'] ?? 'defer';
  if (delPolicy !== 'defer' && delPolicy !== 'strict')
    problems.push(`--del-policy must be defer or strict, got "${delPolicy}"`);
  const logLevel = level(values['log-level'], problems);
  const retry: RetryPolicy = {
    baseDelayMs: int('retry-base-ms', values['retry-base-ms'], DEFAULT_RETRY_POLICY.baseDelayMs, 1, problems),
    maxDelayMs: int('retry-max-ms', values['retry-max-ms'], DEFAULT_RETRY_POLICY.maxDelayMs, 1, problems),
    maxAttempts: int('retry-max-attempts', values['retry-max-attempts'], DEFAULT_RETRY_POLICY.maxAttempts, 1, problems),
    maxAgeMs: int('retry-max-age', values['retry-max-age'], DEFAULT_RETRY_POLICY.maxAgeMs / 1000, 1, problems) * 1000,
  };
  const cfg: DaemonConfig = {
    socket: resolve(values.socket ?? DEFAULT_SOCKET),
    stateDir,
    dbPath: resolve(values.db ?? join(stateDir, 'steward.db')),
    spoolDir: resolve(values['spool-dir'] ?? join(stateDir, 'spool')),
    binDirs: (values['bin-dir'] ?? ['/opt/cni/bin']).map((d) => resolve(d)),
    maxParallel: int('max-parallel', values['max-parallel'], 8, 1, problems),
    pluginTimeoutMs: int('plugin-timeout', values['plugin-timeout'], 60, 1, problems) * 1000,
    delPolicy: delPolicy as DelPolicy,
    bootIdFile: values['boot-id-file'] ?? '/proc/sys/kernel/random/boot_id',
    retry,
    tombstoneTtlMs: int('tombstone-ttl', values['tombstone-ttl'], 3600, 0, problems) * 1000,
    pruneIntervalMs: int('prune-interval', values['prune-interval'], 60, 1, problems) * 1000,
    shutdownGraceMs: int('shutdown-grace', values['shutdown-grace'], 20, 0, problems) * 1000,
    logLevel,
    cniConfDir: values['cni-conf-dir'] ? resolve(values['cni-conf-dir']) : undefined,
    uninstallOnDelete: uninstallOnDelete as UninstallMode,
    api: apiAccess(values, problems),
    drainTimeoutMs: int('drain-timeout', values['drain-timeout'], 30, 0, problems) * 1000,
    metricsListen: metricsListen(values['metrics-listen'], problems),
  };
  fail(problems, RUN_USAGE);
  return cfg;
}

function metricsListen(raw: string | undefined, problems: string[]): ListenAddress | undefined {
  if (raw === undefined) return undefined;
  const a = parseListenAddress(raw);
  if ('why' in a) {
    problems.push(a.why);
    return undefined;
  }
  return a;
}

/** In-cluster API access, as client-go's InClusterConfig finds it; undefined outside a cluster. */
function apiAccess(
  v: Record<string, string | boolean | string[] | undefined>,
  problems: string[],
): ApiAccess | undefined {
  const str = (k: string) => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
  const tokenFile = str('k8s-token-file') ?? `${SA_DIR}/token`;
  if (!existsSync(tokenFile)) return undefined;
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  const server = str('k8s-api') ?? (host ? `https://${host.includes(':') ? `[${host}]` : host}:${port}` : undefined);
  const namespace = str('namespace') ?? process.env.POD_NAMESPACE;
  const daemonSet = str('daemonset') ?? process.env.STEWARD_DAEMONSET;
  if (!server)
    problems.push(
      `a service-account token exists (${tokenFile}) but neither --k8s-api nor KUBERNETES_SERVICE_HOST is set`,
    );
  if (!namespace) problems.push("in a cluster, --namespace or POD_NAMESPACE must name this pod's namespace");
  if (!daemonSet) problems.push("in a cluster, --daemonset or STEWARD_DAEMONSET must name this pod's DaemonSet");
  if (!server || !namespace || !daemonSet) return undefined;
  return {
    server,
    tokenFile,
    caFile: str('k8s-ca-file') ?? `${SA_DIR}/ca.crt`,
    namespace,
    daemonSet,
    timeoutMs: int('k8s-timeout', str('k8s-timeout'), 5, 1, problems) * 1000,
  };
}

// ---- install / uninstall / probe ----

/** Where builds put the shims: <repo>/dist in a checkout, /app/dist in the image. */
const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

/** A checkout's own shim for this machine (npm run build): <repo>/dist/steward. */
export const DEFAULT_SHIM = join(DIST, 'steward');

/**
 * The shim built for a node of this CPU and libc, as scripts/build-shims.mjs names it:
 * <dist>/shims/steward-linux-<x64|arm64>[-musl]. The CPU is the one this daemon runs on (`uname -m`:
 * an image is built per architecture and runs natively); the libc is the host's, which a container
 * cannot see, so it is a flag (--shim-libc).
 */
export function shimFor(libc: ShimLibc, arch: string = process.arch, dist: string = DIST): string {
  return join(dist, 'shims', `steward-linux-${arch}${libc === 'musl' ? '-musl' : ''}`);
}

/** --shim's default: the per-node shim where the tree carries it (the image), else a checkout's dist/steward (glibc only). */
export function defaultShim(libc: ShimLibc, arch: string = process.arch, dist: string = DIST): string {
  const perNode = shimFor(libc, arch, dist);
  return libc === 'glibc' && !existsSync(perNode) ? join(dist, 'steward') : perNode;
}

const LIFECYCLE_PATHS = `  --cni-bin-dir DIR        CNI plugin dir the runtime searches (default /opt/cni/bin)
  --cni-conf-dir DIR       CNI network config dir (default /etc/cni/net.d)
  --state-dir DIR          where the install record lives (default ${DEFAULT_STATE_DIR})
  --log-level LEVEL        pino level, logs go to stderr (default info)`;

export const INSTALL_USAGE = `usage: stewardd install [options]
  copies the steward shim into the CNI bin dir and writes 00-steward.conflist wrapping the primary network
${LIFECYCLE_PATHS}
  --shim PATH              the single-executable shim to copy (default: the one for this CPU and
                           --shim-libc under ${join(DIST, 'shims')}, else ${DEFAULT_SHIM})
  --shim-libc glibc|musl   the host's C library, which picks the default --shim (default glibc)
  --socket PATH            daemon socket written into the conflist (default ${DEFAULT_SOCKET})
  --spool-dir DIR          spool dir written into the conflist (default <state-dir>/spool)
  --force                  overwrite files at our paths that stewardd did not write`;

export const UNINSTALL_USAGE = `usage: stewardd uninstall [options]
  drains pending teardowns, then removes exactly what install added, if unchanged since
${LIFECYCLE_PATHS}
  --socket PATH            daemon socket to drain through (default: the one recorded at install)
  --db PATH                database read when the daemon is not running (default <state-dir>/steward.db)
  --drain-timeout SEC      time given to pending teardowns (default 30)
  --purge                  also remove the state dir`;

const pathOptions = {
  'cni-bin-dir': { type: 'string' },
  'cni-conf-dir': { type: 'string' },
  'state-dir': { type: 'string' },
  socket: { type: 'string' },
  'log-level': { type: 'string' },
} as const;

function fail(problems: string[], usage: string): void {
  if (problems.length > 0) throw new Error(`invalid options:\n  ${problems.join('\n  ')}\n\n${usage}`);
}

function level(raw: string | undefined, problems: string[]): string {
  const l = raw ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(l))
    problems.push(`--log-level "${l}" is not a pino level`);
  return l;
}

export function parseInstallConfig(argv: string[]): InstallConfig {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      ...pathOptions,
      shim: { type: 'string' },
      'shim-libc': { type: 'string' },
      'spool-dir': { type: 'string' },
      force: { type: 'boolean' },
    },
  });
  const problems: string[] = [];
  const shimLibc = (values['shim-libc'] ?? 'glibc') as ShimLibc;
  if (shimLibc !== 'glibc' && shimLibc !== 'musl')
    problems.push(`--shim-libc "${values['shim-libc']}" is not glibc or musl`);
  const stateDir = resolve(values['state-dir'] ?? DEFAULT_STATE_DIR);
  const cfg: InstallConfig = {
    cniBinDir: resolve(values['cni-bin-dir'] ?? '/opt/cni/bin'),
    cniConfDir: resolve(values['cni-conf-dir'] ?? '/etc/cni/net.d'),
    stateDir,
    shim: resolve(values.shim ?? defaultShim(shimLibc)),
    shimLibc,
    socket: resolve(values.socket ?? DEFAULT_SOCKET),
    spoolDir: resolve(values['spool-dir'] ?? join(stateDir, 'spool')),
    force: values.force ?? false,
    logLevel: level(values['log-level'], problems),
  };
  fail(problems, INSTALL_USAGE);
  return cfg;
}

export function parseUninstallConfig(argv: string[]): UninstallConfig {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      ...pathOptions,
      db: { type: 'string' },
      'drain-timeout': { type: 'string' },
      purge: { type: 'boolean' },
    },
  });
  const problems: string[] = [];
  const stateDir = resolve(values['state-dir'] ?? DEFAULT_STATE_DIR);
  const cfg: UninstallConfig = {
    // Only cross-checked against the record: uninstall removes what the record names.
    cniBinDir: values['cni-bin-dir'] ? resolve(values['cni-bin-dir']) : undefined,
    cniConfDir: values['cni-conf-dir'] ? resolve(values['cni-conf-dir']) : undefined,
    stateDir,
    dbPath: resolve(values.db ?? join(stateDir, 'steward.db')),
    socket: values.socket ? resolve(values.socket) : undefined,
    drainTimeoutMs: int('drain-timeout', values['drain-timeout'], 30, 0, problems) * 1000,
    purge: values.purge ?? false,
    logLevel: level(values['log-level'], problems),
  };
  fail(problems, UNINSTALL_USAGE);
  return cfg;
}

export const PROBE_USAGE = `usage: stewardd probe [--socket PATH] [--timeout SEC] /healthz|/readyz
  GET the path on the daemon socket; exit 0 on HTTP 200 (for kubelet exec probes)`;

export function parseProbeArgs(argv: string[]): { socket: string; path: string; timeoutMs: number } {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: { socket: { type: 'string' }, timeout: { type: 'string' } },
  });
  const problems: string[] = [];
  const path = positionals[0] ?? '/readyz';
  if (positionals.length > 1 || !path.startsWith('/')) problems.push('give one path starting with "/"');
  const timeoutMs = int('timeout', values.timeout, 3, 1, problems) * 1000;
  fail(problems, PROBE_USAGE);
  return { socket: resolve(values.socket ?? DEFAULT_SOCKET), path, timeoutMs };
}
