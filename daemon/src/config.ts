// The command line of the daemon process itself: `stewardd run` (every flag of the serving daemon,
// into DaemonConfig). Every bad value is reported at once (flags.ts). `stewardd probe` parses its own
// two flags in probe.ts; the install/uninstall command lines belong to lifecycle/command-line.ts; the
// operator commands (status, attachments, ...) parse their own few flags in cli/index.ts. The checks
// only `run`'s values need are config-checks.ts's.
// One concern: one command line's flags, their help text and their parsing, long because `run` has
// some forty flags; the checks across flags are in config-checks.ts.

import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { DEFAULT_RESTART_GRACE_S, DEFAULT_SOCKET, DEFAULT_STATE_DIR } from '@cni-steward/shared';
import type { ApiAccess } from './lifecycle/k8s.js';
import type { UninstallMode } from './lifecycle/options.js';
import { cniVersionMode } from './lifecycle/command-line.js';
import type { CniVersionMode } from './lifecycle/cni-version.js';
import { defaultShim } from './lifecycle/shim-path.js';
import { DEFAULT_RETRY_POLICY, HOLD_MAX_ATTEMPTS, type RetryPolicy } from './engine/teardown.js';
import type { DelPolicy } from './engine/engine.js';
import type { ListenAddress } from './metrics-listener.js';
import { fail, int, level, niceValue, restartGraceSeconds, runtimeEndpoint } from './flags.js';
import { DEFAULT_GRACE_MS } from './audit/options.js';
import { pluginMountNs } from './plugins/mount-ns.js';
import { spoolDirFlagProblems } from './spool-dir-check.js';
import {
  checkDeadlineChain,
  duration,
  MAX_TIMER_MS,
  metricsListen,
  tracingConfig,
  type TracingConfig,
} from './config-checks.js';

export interface DaemonConfig {
  socket: string;
  stateDir: string;
  dbPath: string;
  spoolDir: string;
  binDirs: string[];
  maxParallel: number;
  /** stewardd's threads' nice value (priority.ts); undefined: left as started. */
  nice: number | undefined;
  pluginTimeoutMs: number;
  /** --plugin-mount-ns: the mount namespace delegates run in (plugins/mount-ns.ts); undefined: stewardd's. */
  pluginMountNs: string | undefined;
  delPolicy: DelPolicy;
  bootIdFile: string;
  retry: RetryPolicy;
  tombstoneTtlMs: number;
  pruneIntervalMs: number;
  shutdownGraceMs: number;
  /**
   * --restart-grace: how long the restart record covers the successor's start (shared/src/restart.ts);
   * undefined: the install record's, else DEFAULT_RESTART_GRACE_S.
   */
  restartGraceMs: number | undefined;
  logLevel: string;
  cniConfDir: string | undefined;
  /** --cni-version: how the conflist's version is chosen at start, with --cni-conf-dir (lifecycle/cni-version.ts). */
  cniVersion: CniVersionMode;
  /** What SIGTERM does to the node's install (lifecycle/on-term.ts). */
  uninstallOnDelete: UninstallMode;
  /** In-cluster API access; undefined when there is no service-account token. */
  api: ApiAccess | undefined;
  drainTimeoutMs: number;
  /** How long start-up recovery may keep the socket closed; the rest runs while stewardd serves. */
  recoveryWaitMs: number;
  /** --metrics-listen: the TCP address serving GET /metrics only; undefined = off. */
  metricsListen: ListenAddress | undefined;
  /** This daemon's own shim, compared with the installed one when --cni-conf-dir is given (lifecycle/shim-check.ts). */
  shim: string;
  /** --runtime-endpoint: the CRI socket asked who is alive (audit); undefined = probe the usual ones. */
  runtimeEndpoint: string | undefined;
  /** host-local dataDirs the audit always scans (besides those named in journalled configs). */
  auditLeaseDirs: string[];
  /** libcni's result cache the audit scans. */
  auditCacheDir: string;
  /** Networks whose portmap rules the audit considers; empty = every network. */
  auditPortmapNetworks: string[];
  /** --audit-interval: a periodic audit pass every this many ms; undefined = none. */
  auditIntervalMs: number | undefined;
  /** --audit-release: the periodic pass releases orphans past --audit-grace (else it only reports). */
  auditRelease: boolean;
  /** --audit-grace: the periodic pass's grace. */
  auditGraceMs: number;
  /** Traces exported over OTLP/HTTP (docs/tracing.md); `url` undefined = off. */
  tracing: TracingConfig;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export const RUN_USAGE = `usage: stewardd run [options]
  --socket PATH            Unix socket to serve on (default ${DEFAULT_SOCKET})
  --state-dir DIR          database and spool live here (default ${DEFAULT_STATE_DIR})
  --db PATH                SQLite file (default <state-dir>/steward.db)
  --spool-dir DIR          DELs written by the shim while the daemon was down (default <state-dir>/spool)
  --bin-dir DIR            delegate plugin dir, repeatable; searched before the request's CNI_PATH (default /opt/cni/bin)
  --max-parallel N         concurrent delegate plugin executions (default 8; background
                           teardown takes at most N - 2 of them, 1 with N of 3 or less)
  --nice N|off             stewardd's own threads at this nice value, -20..19 (default -10: its answers gate
                           every pod and the node's NetworkReady); the delegates keep the nice it was started
                           with; off leaves it as started. Needs CAP_SYS_NICE, else logged and left as started
  --plugin-timeout SEC     deadline for one plugin execution (default 60)
  --plugin-mount-ns PATH   run delegates in this mount namespace (the node's, /proc/1/ns/mnt with hostPID)
  --del-policy defer|strict  what a DEL whose teardown failed returns (default defer: success, retried in background)
  --boot-id-file PATH      kernel boot id source (default /proc/sys/kernel/random/boot_id)
  --retry-base-ms MS       first teardown retry delay, doubling (default 1000)
  --retry-max-ms MS        longest teardown retry delay (default 300000)
  --retry-max-attempts N   abandon a teardown step after N failed DELs (default 50)
  --retry-max-age SEC      ...or once it has been pending this long while stewardd ran (default 86400)
  --retry-hold-attempts N  a step whose ADD succeeded and whose DEL keeps failing holds the steps
                           before it for at most N failed DELs, then is abandoned (default 10)
  --tombstone-ttl SEC      keep finished attachments this long to answer repeated DELs (default 3600)
  --prune-interval SEC     how often finished attachments past the TTL are deleted (default 60)
  --shutdown-grace SEC     on SIGTERM, wait this long for in-flight requests (default 20)
  --restart-grace SEC      on SIGTERM where the node keeps steward, the shim tells the runtime the network is
                           ready, and holds ADDs, for this long after serving stops until a successor serves
                           (0 to 120; default: stewardd install's --restart-grace, else ${DEFAULT_RESTART_GRACE_S}; 0: a restart is
                           told as not ready)
  --cni-conf-dir DIR       watch this CNI conf dir and keep 00-steward.conflist in step with the primary network
  --cni-version auto|primary|0.3.1|0.4.0|1.0.0|1.1.0
                           with --cni-conf-dir: the conflist's cniVersion, decided again at start before
                           serving (default auto: 1.1.0 only where the runtime, asked through CRI Version on
                           --runtime-endpoint, accepts it and calls STATUS; a downgraded runtime gets the
                           primary's version back)
  --shim PATH              this stewardd's own shim; with --cni-conf-dir, /readyz fails while the shim install
                           recorded in the CNI bin dir is another build (default: as stewardd install's --shim)
  --shim-libc glibc|musl   accepted for older manifests; the static shim runs on either (default glibc)
  --uninstall-on-delete auto|always|never
                           on SIGTERM, uninstall from the node? auto (default): only if the API server says this
                           pod's DaemonSet is gone or being deleted; never without a service-account token
  --drain-timeout SEC      on uninstall, time given to pending teardowns (default 30)
  --recovery-wait SEC      at start, how long recovery (a reboot's sweep, cut-off ADDs rolled back) may
                           keep the socket closed; the rest goes on while stewardd serves (default 60)
  --k8s-api URL            API server (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
  --k8s-token-file PATH    (default ${SA_DIR}/token)
  --k8s-ca-file PATH       (default ${SA_DIR}/ca.crt)
  --k8s-timeout SEC        deadline for the API request (default 5)
  --namespace NS           this pod's namespace (default $POD_NAMESPACE)
  --daemonset NAME         this pod's DaemonSet (default $STEWARD_DAEMONSET; $POD_NAME, when set, must
                           be NAME-<5 characters>, as its pods are named, for its absence to uninstall)
  --metrics-listen ADDR:PORT
                           also serve GET /metrics (only) on this TCP address for Prometheus, e.g. 0.0.0.0:9631;
                           ADDR is an IP address (or empty for all), never a name
                           (default off; the control API stays on the socket)
  --runtime-endpoint unix:///PATH
                           the CRI runtime the audit asks which sandboxes exist (default: probe
                           /run/containerd/containerd.sock, then /var/run/crio/crio.sock)
  --audit-lease-dir DIR    host-local dataDir the audit scans, repeatable (default /var/lib/cni/networks;
                           dataDirs named in journalled configs are scanned too)
  --audit-cache-dir DIR    libcni result cache the audit scans (default /var/lib/cni/results)
  --audit-portmap-network NAME
                           only portmap rules (CNI-DN-* chains) of this network are audited, repeatable
                           (default: every network's)
  --audit-interval DUR     run an audit pass every DUR (e.g. 10m, 1h; 1s to 596h): report only, logged and
                           counted in the steward_audit_* metrics (default off)
  --audit-release          the periodic pass also releases the orphans past --audit-grace, as
                           stewardd audit --release does (needs --audit-interval; default off: report only)
  --audit-grace DUR        the periodic pass's grace (default 15m)
  --otlp-endpoint URL      export traces over OTLP/HTTP to this collector (http:// or https://; /v1/traces is
                           appended unless the path already ends so); default off, or OTEL_EXPORTER_OTLP_ENDPOINT
                           (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given). Each CNI request continues the
                           runtime's trace; see docs/tracing.md
  --otlp-queue-size N      spans waiting for export at most; more are dropped and counted in
                           steward_trace_spans_dropped_total (default OTEL_BSP_MAX_QUEUE_SIZE, else 2048)
  --log-level LEVEL        pino level (default info)`;

/** `stewardd run`'s flags (RUN_USAGE says what each means). */
const RUN_FLAGS = {
  socket: { type: 'string' },
  'state-dir': { type: 'string' },
  db: { type: 'string' },
  'spool-dir': { type: 'string' },
  'bin-dir': { type: 'string', multiple: true },
  'max-parallel': { type: 'string' },
  nice: { type: 'string' },
  'plugin-timeout': { type: 'string' },
  'plugin-mount-ns': { type: 'string' },
  'del-policy': { type: 'string' },
  'boot-id-file': { type: 'string' },
  'retry-base-ms': { type: 'string' },
  'retry-max-ms': { type: 'string' },
  'retry-max-attempts': { type: 'string' },
  'retry-max-age': { type: 'string' },
  'retry-hold-attempts': { type: 'string' },
  'tombstone-ttl': { type: 'string' },
  'prune-interval': { type: 'string' },
  'shutdown-grace': { type: 'string' },
  'restart-grace': { type: 'string' },
  'cni-conf-dir': { type: 'string' },
  'cni-version': { type: 'string' },
  shim: { type: 'string' },
  'shim-libc': { type: 'string' },
  'uninstall-on-delete': { type: 'string' },
  'drain-timeout': { type: 'string' },
  'recovery-wait': { type: 'string' },
  'k8s-api': { type: 'string' },
  'k8s-token-file': { type: 'string' },
  'k8s-ca-file': { type: 'string' },
  'k8s-timeout': { type: 'string' },
  namespace: { type: 'string' },
  daemonset: { type: 'string' },
  'log-level': { type: 'string' },
  'metrics-listen': { type: 'string' },
  'runtime-endpoint': { type: 'string' },
  'audit-lease-dir': { type: 'string', multiple: true },
  'audit-cache-dir': { type: 'string' },
  'audit-portmap-network': { type: 'string', multiple: true },
  'audit-interval': { type: 'string' },
  'audit-release': { type: 'boolean' },
  'audit-grace': { type: 'string' },
  'otlp-endpoint': { type: 'string' },
  'otlp-queue-size': { type: 'string' },
} as const;

export function parseRunConfig(argv: string[]): DaemonConfig {
  const { values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: RUN_FLAGS });
  const problems: string[] = [];
  const uninstallOnDelete = values['uninstall-on-delete'] ?? 'auto';
  if (!['auto', 'always', 'never'].includes(uninstallOnDelete)) {
    problems.push(`--uninstall-on-delete must be auto, always or never, got "${uninstallOnDelete}"`);
  }
  const stateDir = resolve(values['state-dir'] ?? DEFAULT_STATE_DIR);
  const shimLibc = values['shim-libc'] ?? 'glibc';
  if (shimLibc !== 'glibc' && shimLibc !== 'musl') problems.push(`--shim-libc "${shimLibc}" is not glibc or musl`);
  const delPolicy = values['del-policy'] ?? 'defer';
  if (delPolicy !== 'defer' && delPolicy !== 'strict')
    problems.push(`--del-policy must be defer or strict, got "${delPolicy}"`);
  const logLevel = level(values['log-level'], problems);
  const retry = retryPolicy(values, problems);
  const cfg: DaemonConfig = {
    socket: resolve(values.socket ?? DEFAULT_SOCKET),
    stateDir,
    dbPath: resolve(values.db ?? join(stateDir, 'steward.db')),
    spoolDir: resolve(values['spool-dir'] ?? join(stateDir, 'spool')),
    binDirs: (values['bin-dir'] ?? ['/opt/cni/bin']).map((d) => resolve(d)),
    maxParallel: int('max-parallel', values['max-parallel'], 8, 1, problems),
    nice: niceValue(values.nice, problems),
    pluginTimeoutMs: int('plugin-timeout', values['plugin-timeout'], 60, 1, problems, MAX_TIMER_S) * 1000,
    pluginMountNs: pluginMountNs(values['plugin-mount-ns'], problems),
    delPolicy: delPolicy as DelPolicy,
    bootIdFile: values['boot-id-file'] ?? '/proc/sys/kernel/random/boot_id',
    retry,
    tombstoneTtlMs: int('tombstone-ttl', values['tombstone-ttl'], 3600, 0, problems) * 1000,
    pruneIntervalMs: int('prune-interval', values['prune-interval'], 60, 1, problems, MAX_TIMER_S) * 1000,
    shutdownGraceMs: int('shutdown-grace', values['shutdown-grace'], 20, 0, problems, MAX_TIMER_S) * 1000,
    restartGraceMs: (() => {
      const seconds = restartGraceSeconds(values['restart-grace'], problems);
      return seconds === undefined ? undefined : seconds * 1000;
    })(),
    logLevel,
    cniConfDir: values['cni-conf-dir'] ? resolve(values['cni-conf-dir']) : undefined,
    cniVersion: cniVersionMode(values['cni-version'], problems),
    uninstallOnDelete: uninstallOnDelete as UninstallMode,
    api: apiAccess(values, problems),
    drainTimeoutMs: int('drain-timeout', values['drain-timeout'], 30, 0, problems, MAX_TIMER_S) * 1000,
    recoveryWaitMs: int('recovery-wait', values['recovery-wait'], 60, 0, problems, MAX_TIMER_S) * 1000,
    metricsListen: metricsListen(values['metrics-listen'], problems),
    shim: resolve(values.shim ?? defaultShim(shimLibc === 'musl' ? 'musl' : 'glibc')),
    runtimeEndpoint: runtimeEndpoint(values['runtime-endpoint'], problems),
    auditLeaseDirs: (values['audit-lease-dir'] ?? ['/var/lib/cni/networks']).map((d) => resolve(d)),
    auditCacheDir: resolve(values['audit-cache-dir'] ?? '/var/lib/cni/results'),
    auditPortmapNetworks: values['audit-portmap-network'] ?? [],
    auditIntervalMs: duration('audit-interval', values['audit-interval'], undefined, 1000, problems, MAX_TIMER_MS),
    auditRelease: values['audit-release'] === true,
    auditGraceMs: duration('audit-grace', values['audit-grace'], DEFAULT_GRACE_MS, 0, problems) as number,
    tracing: tracingConfig(values['otlp-endpoint'], values['otlp-queue-size'], process.env, problems),
  };
  if (cfg.auditRelease && values['audit-interval'] === undefined)
    problems.push('--audit-release needs --audit-interval (it makes the periodic audit pass release)');
  checkDeadlineChain(cfg.pluginTimeoutMs, problems);
  problems.push(...spoolDirFlagProblems(cfg.spoolDir, cfg.stateDir, cfg.cniConfDir));
  fail(problems, RUN_USAGE);
  return cfg;
}

type RunValues = ReturnType<typeof parseArgs<{ options: typeof RUN_FLAGS }>>['values'];

/** The longest timer Node keeps (config-checks.ts MAX_TIMER_MS), in whole seconds: a longer one fires at once. */
const MAX_TIMER_S = Math.floor(MAX_TIMER_MS / 1000);

function retryPolicy(values: RunValues, problems: string[]): RetryPolicy {
  const policy: RetryPolicy = {
    baseDelayMs: int(
      'retry-base-ms',
      values['retry-base-ms'],
      DEFAULT_RETRY_POLICY.baseDelayMs,
      1,
      problems,
      MAX_TIMER_MS,
    ),
    maxDelayMs: int('retry-max-ms', values['retry-max-ms'], DEFAULT_RETRY_POLICY.maxDelayMs, 1, problems, MAX_TIMER_MS),
    maxAttempts: int('retry-max-attempts', values['retry-max-attempts'], DEFAULT_RETRY_POLICY.maxAttempts, 1, problems),
    maxAgeMs: int('retry-max-age', values['retry-max-age'], DEFAULT_RETRY_POLICY.maxAgeMs / 1000, 1, problems) * 1000,
    holdMaxAttempts: int('retry-hold-attempts', values['retry-hold-attempts'], HOLD_MAX_ATTEMPTS, 1, problems),
  };
  // The longest delay is never shorter than the first: a --retry-max-ms below --retry-base-ms is taken
  // as --retry-base-ms (accepted as before, rather than a daemon that no longer starts on upgrade).
  return { ...policy, maxDelayMs: Math.max(policy.maxDelayMs, policy.baseDelayMs) };
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
    ...(process.env.POD_NAME ? { podName: process.env.POD_NAME } : {}),
    timeoutMs: int('k8s-timeout', str('k8s-timeout'), 5, 1, problems) * 1000,
  };
}
