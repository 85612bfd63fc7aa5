// The install and uninstall command lines: their flag tables, usage texts and parsing into the
// option types of options.ts. The shim's default location is shim-path.ts; the shared value checks
// are ../flags.ts. `stewardd run` and `probe` are parsed by ../config.ts.

import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR, MAX_SOCKET_PATH_BYTES } from '@cni-steward/shared';
import { fail, int, level, restartGraceSeconds, runtimeEndpoint } from '../flags.js';
import { spoolDirFlagProblems } from '../spool-dir-check.js';
import type { InstallConfig, ShimLibc, UninstallConfig } from './options.js';
import { CNI_VERSION_MODES, parseCniVersionMode, type CniVersionMode } from './cni-version.js';
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
  --force                  overwrite files at our paths that stewardd did not write
  --cni-version auto|primary|0.3.1|0.4.0|1.0.0|1.1.0
                           steward's own conflist version (default auto: 1.1.0, so that STATUS and GC are
                           asked, only where the runtime accepts it and calls STATUS: containerd >= 2.0.1,
                           CRI-O >= 1.32, asked through CRI Version; else the primary's version)
  --runtime-endpoint unix:///PATH
                           the CRI runtime auto asks (default: the first of the containerd and CRI-O sockets
                           that exists)
  --restart-grace SEC      recorded for stewardd run: after a SIGTERM that keeps steward, how long the shim
                           tells the runtime the network is ready while no stewardd serves (0 to 120; run's
                           own --restart-grace wins; default 15)`;

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

type Flag = { type: 'string' } | { type: 'boolean' };
type Values = Record<string, string | boolean | undefined>;

/**
 * The preamble install and uninstall share: their flags over the common path flags, strict, no
 * positionals; the problems found so far (none yet) and the state dir every path defaults under.
 */
function parseLifecycle(argv: string[], own: Record<string, Flag>) {
  const values = parseArgs({ args: argv, strict: true, allowPositionals: false, options: { ...pathOptions, ...own } })
    .values as Values;
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const problems: string[] = [];
  return { values, str, problems, stateDir: resolve(str('state-dir') ?? DEFAULT_STATE_DIR) };
}

export function parseInstallConfig(argv: string[]): InstallConfig {
  const { values, str, problems, stateDir } = parseLifecycle(argv, {
    shim: { type: 'string' },
    'shim-libc': { type: 'string' },
    'spool-dir': { type: 'string' },
    force: { type: 'boolean' },
    'cni-version': { type: 'string' },
    'runtime-endpoint': { type: 'string' },
    'restart-grace': { type: 'string' },
  });
  const shimLibc = (str('shim-libc') ?? 'glibc') as ShimLibc;
  if (shimLibc !== 'glibc' && shimLibc !== 'musl')
    problems.push(`--shim-libc "${str('shim-libc')}" is not glibc or musl`);
  const cfg: InstallConfig = {
    cniBinDir: resolve(str('cni-bin-dir') ?? '/opt/cni/bin'),
    cniConfDir: resolve(str('cni-conf-dir') ?? '/etc/cni/net.d'),
    stateDir,
    shim: resolve(str('shim') ?? defaultShim(shimLibc)),
    shimLibc,
    socket: resolve(str('socket') ?? DEFAULT_SOCKET),
    spoolDir: resolve(str('spool-dir') ?? join(stateDir, 'spool')),
    force: values.force === true,
    logLevel: level(str('log-level'), problems),
    cniVersion: cniVersionMode(str('cni-version'), problems),
    runtimeEndpoint: runtimeEndpoint(str('runtime-endpoint'), problems),
  };
  const grace = restartGraceSeconds(str('restart-grace'), problems);
  if (grace !== undefined) cfg.restartGraceS = grace;
  // The shim refuses a socket path no Unix socket can have (code 7 on every ADD): never write one.
  if (Buffer.byteLength(cfg.socket) > MAX_SOCKET_PATH_BYTES)
    problems.push(
      `--socket is ${Buffer.byteLength(cfg.socket)} bytes long; a Unix socket path is at most ${MAX_SOCKET_PATH_BYTES}`,
    );
  problems.push(...spoolDirFlagProblems(cfg.spoolDir, cfg.stateDir, cfg.cniConfDir));
  fail(problems, INSTALL_USAGE);
  return cfg;
}

/** --cni-version's value (default auto); a problem when it is none of the modes. */
export function cniVersionMode(raw: string | undefined, problems: string[]): CniVersionMode {
  const mode = parseCniVersionMode(raw ?? 'auto');
  if (mode === undefined) problems.push(`--cni-version must be one of ${CNI_VERSION_MODES.join(', ')}, got "${raw}"`);
  return mode ?? 'auto';
}

const optionalPath = (p: string | undefined): string | undefined => (p ? resolve(p) : undefined);

export function parseUninstallConfig(argv: string[]): UninstallConfig {
  const { values, str, problems, stateDir } = parseLifecycle(argv, {
    db: { type: 'string' },
    'drain-timeout': { type: 'string' },
    purge: { type: 'boolean' },
  });
  const cfg: UninstallConfig = {
    // Only cross-checked against the record: uninstall removes what the record names.
    cniBinDir: optionalPath(str('cni-bin-dir')),
    cniConfDir: optionalPath(str('cni-conf-dir')),
    stateDir,
    dbPath: resolve(str('db') ?? join(stateDir, 'steward.db')),
    socket: optionalPath(str('socket')),
    drainTimeoutMs: int('drain-timeout', str('drain-timeout'), 30, 0, problems) * 1000,
    purge: values.purge === true,
    logLevel: level(str('log-level'), problems),
  };
  fail(problems, UNINSTALL_USAGE);
  return cfg;
}
