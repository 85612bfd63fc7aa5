// The install and uninstall command lines: their flag tables, usage texts and parsing into the
// option types of options.ts. The shim's default location is shim-path.ts; the shared value checks
// are ../flags.ts. `stewardd run` and `probe` are parsed by ../config.ts.

import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR, MAX_SOCKET_PATH_BYTES } from '@cni-steward/shared';
import { fail, int, level } from '../flags.js';
import type { InstallConfig, ShimLibc, UninstallConfig } from './options.js';
import { DEFAULT_SHIM, DIST, defaultShim } from './shim-path.js';

const LIFECYCLE_PATHS = `  --cni-bin-dir DIR        CNI plugin dir the runtime searches (default /opt/cni/bin)
  --cni-conf-dir DIR       CNI network config dir (default /etc/cni/net.d)
  --state-dir DIR          where the install record lives (default ${DEFAULT_STATE_DIR})
  --log-level LEVEL        pino level, logs go to stderr (default info)`;

export const INSTALL_USAGE = `usage: stewardd install [options]
  copies the steward shim into the CNI bin dir and writes 00-steward.conflist wrapping the primary network
${LIFECYCLE_PATHS}
  --shim PATH              the static shim binary to copy (default: the one for this CPU
                           under ${join(DIST, 'shims')}, else ${DEFAULT_SHIM})
  --shim-libc glibc|musl   accepted for older manifests; the static shim runs on either (default glibc)
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
  // The shim refuses a socket path no Unix socket can have (code 7 on every ADD): never write one.
  if (Buffer.byteLength(cfg.socket) > MAX_SOCKET_PATH_BYTES)
    problems.push(
      `--socket is ${Buffer.byteLength(cfg.socket)} bytes long; a Unix socket path is at most ${MAX_SOCKET_PATH_BYTES}`,
    );
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
