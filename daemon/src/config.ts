// The only reader of the daemon's command line. Every bad value is reported at once.

import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR } from '@cni-steward/shared';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './engine/teardown.js';
import type { DelPolicy } from './engine/engine.js';

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
  shutdownGraceMs: number;
  logLevel: string;
  cniConfDir: string | undefined;
}

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
  --shutdown-grace SEC     on SIGTERM, wait this long for in-flight requests (default 20)
  --cni-conf-dir DIR       watch this CNI conf dir and keep 00-steward.conflist in step with the primary network
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
      'shutdown-grace': { type: 'string' },
      'cni-conf-dir': { type: 'string' },
      'log-level': { type: 'string' },
    },
  });
  const problems: string[] = [];
  const stateDir = resolve(values['state-dir'] ?? DEFAULT_STATE_DIR);
  const delPolicy = values['del-policy'] ?? 'defer';
  if (delPolicy !== 'defer' && delPolicy !== 'strict') problems.push(`--del-policy must be defer or strict, got "${delPolicy}"`);
  const logLevel = values['log-level'] ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) problems.push(`--log-level "${logLevel}" is not a pino level`);
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
    shutdownGraceMs: int('shutdown-grace', values['shutdown-grace'], 20, 0, problems) * 1000,
    logLevel,
    cniConfDir: values['cni-conf-dir'] ? resolve(values['cni-conf-dir']) : undefined,
  };
  if (problems.length > 0) throw new Error(`invalid options:\n  ${problems.join('\n  ')}\n\n${RUN_USAGE}`);
  return cfg;
}
