// The install, uninstall and probe subcommands as the operator sees them: a short report on
// stdout (what changed, what was refused, which teardowns were left), JSON logs on stderr.

import { existsSync } from 'node:fs';
import { destination } from 'pino';
import type { Logger } from 'pino';
import { createLogger } from '../log.js';
import { runtimeFor, type RuntimeSource } from '../audit/runtime.js';
import { DEFAULT_RUNTIME_SOCKETS } from '../audit/cri.js';
import {
  appliesAtStart,
  chooseConflistVersion,
  describeChoice,
  manyRuntimes,
  VERSION_ASK_MS,
  VERSION_ASK_SERVING_MS,
  type CniVersionMode,
  type ConflistVersionChoice,
} from './cni-version.js';
import type { InstallConfig, UninstallConfig } from './options.js';
import { install, LifecycleError } from './install.js';
import { uninstall, type UninstallReport } from './uninstall.js';
import { LockTimeoutError } from './lock.js';
import { readRecord } from './record.js';
import { StateDirBusyError, takeOwnership, type OwnerLock } from '../store/owner.js';

const stderrLog = (level: string) => createLogger(level, destination(2));

export async function runInstall(cfg: InstallConfig): Promise<number> {
  const log = stderrLog(cfg.logLevel);
  try {
    const choice = await decideCniVersion(cfg.cniVersion, cfg.runtimeEndpoint, log);
    const { cniVersion: _, runtimeEndpoint: __, ...rest } = cfg;
    const r = await install({ ...rest, cniVersion: choice, log });
    console.log(`shim: ${r.shim} (${r.shimPath}, from ${cfg.shim})`);
    const c = r.conflist;
    switch (c.status) {
      case 'written':
      case 'unchanged':
        console.log(
          `conflist: ${c.status} (${cfg.cniConfDir}/00-steward.conflist wraps ${c.primary}, cniVersion ${c.cniVersion})`,
        );
        console.log(describeChoice(choice, c.cniVersion));
        break;
      case 'no-primary':
        console.log(
          `conflist: not written yet: no primary network config in ${cfg.cniConfDir}; the daemon (--cni-conf-dir) writes it when one appears`,
        );
        break;
      case 'invalid-primary':
        console.log(
          `conflist: not written yet: ${c.primary} is not usable (${c.why}); the daemon writes it once it is`,
        );
        break;
      case 'foreign':
        console.log(
          `conflist: left as it is: ${c.path} was edited since stewardd wrote it; the daemon reports not ready until it is removed (or \`stewardd install --force\` writes it again)`,
        );
        break;
    }
    for (const p of r.retired.removed) console.log(`removed ${p} (installed earlier at a path no longer used)`);
    for (const k of r.retired.kept) console.log(`left ${k.path} in place: ${k.why}`);
    return 0;
  } catch (e) {
    if (e instanceof LockTimeoutError) return lockTimeout('install', e, log);
    if (!(e instanceof LifecycleError)) throw e;
    log.error(e.message);
    console.log(`install refused: ${e.message}`);
    return 1;
  }
}

/**
 * The conflist's version for `mode`: `auto` asks the runtime (within VERSION_ASK_MS) what it is.
 * Logged either way, with the reason, so the DaemonSet's install log says why STATUS is (not) asked.
 */
export async function decideCniVersion(
  mode: CniVersionMode,
  endpoint: string | undefined,
  log: Logger,
  runtime?: RuntimeSource,
  askMs: number = VERSION_ASK_MS,
  /** The usual runtime sockets looked for (tests give their own). */
  sockets: readonly string[] = DEFAULT_RUNTIME_SOCKETS,
): Promise<ConflistVersionChoice> {
  const present = sockets.filter((s) => existsSync(s));
  if (mode === 'auto' && endpoint === undefined && present.length > 1) {
    const choice = manyRuntimes(present);
    log.warn({ ...choice }, 'conflist version chosen');
    return choice;
  }
  const rt = runtime ?? runtimeFor(endpoint);
  try {
    // Asked whatever the mode: status says whether this runtime asks STATUS at what was written.
    const chosen = chooseConflistVersion(mode, await rt.version(askMs));
    const choice: ConflistVersionChoice =
      endpoint !== undefined && chosen.runtime !== undefined ? { ...chosen, endpointGiven: true } : chosen;
    log.info({ cniVersion: choice.version ?? "the primary's", ...choice }, 'conflist version chosen');
    return choice;
  } finally {
    if (runtime === undefined) rt.close(); // ours: a daemon's own runtime stays open for its audit
  }
}

/**
 * The conflist's version decided again at a daemon's start (once it serves): `apply` (the primary
 * watcher's chooseVersion) is given the choice unless `auto` got no answer (appliesAtStart).
 */
export async function decideAtStart(
  mode: CniVersionMode,
  endpoint: string | undefined,
  log: Logger,
  runtime: RuntimeSource,
  apply: (choice: ConflistVersionChoice) => void,
  sockets: readonly string[] = DEFAULT_RUNTIME_SOCKETS,
): Promise<ConflistVersionChoice> {
  const decided = await decideCniVersion(mode, endpoint, log, runtime, VERSION_ASK_SERVING_MS, sockets);
  if (appliesAtStart(decided)) apply(decided);
  return decided;
}

/** The install lock stayed busy for the whole wait (lock.ts): no file or record was changed. */
function lockTimeout(what: string, e: LockTimeoutError, log: ReturnType<typeof stderrLog>): number {
  log.error({ lock: e.path, holder: e.holder }, e.message);
  console.log(`${what} gave up, nothing removed or written: ${e.message}`);
  return 1;
}

export function printUninstall(r: UninstallReport, stateDir: string, purge = false): void {
  if (!r.installed) console.log(`nothing recorded as installed in ${stateDir}`);
  if (r.superseded)
    console.log(
      `nothing removed: stewardd was installed again (${stateDir}/install.json rewritten) while this uninstall drained; uninstall again to remove that install`,
    );
  if (r.unlocked !== undefined)
    console.log(`the install lock could not be written in ${stateDir} (${r.unlocked}): removed without it`);
  for (const p of r.removed) console.log(`removed ${p}`);
  for (const f of r.movedAside)
    console.log(
      `MOVED ASIDE: ${f.path} -> ${f.to}: changed since install, and it still names the shim, which fails every pod once stewardd is gone; the edit is kept there`,
    );
  for (const f of r.refused) console.log(`REFUSED: ${f.path} ${f.why}; left in place`);
  if (r.refused.length > 0)
    console.log(
      `the install record stays in ${stateDir}${purge ? ' (not purged)' : ''}: once the files above are seen to, uninstall again finishes`,
    );
  if (r.drainError !== undefined) {
    console.log(`teardowns not drained: ${r.drainError} (what the journal owed stays in it)`);
  } else if (r.leftovers.length > 0) {
    console.log(
      `${r.leftovers.length} teardown(s) still pending: ${r.leftovers.map((l) => `step ${l.step} (container ${l.containerId ?? '?'}, ${l.plugin})`).join(', ')}`,
    );
  } else {
    console.log('0 teardowns pending');
  }
  if (r.spooled.length > 0)
    console.log(
      `${r.spooled.length} spooled DEL(s) not run yet (no stewardd ran them; each file is its only record): ${r.spooled.slice(0, 5).join(', ')}${r.spooled.length > 5 ? ', …' : ''}`,
    );
  if (purge && r.spooled.length > 0 && r.refused.length === 0)
    console.log(
      `kept ${stateDir} (not purged): start stewardd with --state-dir ${stateDir} (and --spool-dir naming their dir, when it is another) so it runs them, then uninstall --purge again; or remove them by hand to give them up`,
    );
  if (r.purged) console.log(`purged ${stateDir}`);
  else if (purge && r.refused.length === 0 && r.spooled.length === 0 && existsSync(stateDir))
    console.log(`kept ${stateDir}: it holds files that are not stewardd's (only stewardd's own were removed)`);
}

export async function runUninstall(cfg: UninstallConfig): Promise<number> {
  const log = stderrLog(cfg.logLevel);
  const rec = readRecord(cfg.stateDir);
  for (const [flag, given, recorded] of [
    ['--cni-bin-dir', cfg.cniBinDir, rec?.cniBinDir],
    ['--cni-conf-dir', cfg.cniConfDir, rec?.cniConfDir],
  ] as const) {
    if (given !== undefined && recorded !== undefined && given !== recorded) {
      console.log(`uninstall refused: ${flag} ${given} differs from the install record (${recorded})`);
      return 1;
    }
  }
  // --purge deletes the journal: never under a running daemon. The daemon's own ownership lock is held
  // for the whole uninstall, so none can start mid-purge either. (On SIGTERM the daemon purges itself,
  // holding that lock already; this is the operator's command.)
  let owner: OwnerLock | undefined;
  if (cfg.purge && existsSync(cfg.stateDir)) {
    try {
      owner = takeOwnership([cfg.stateDir], 'nothing (stewardd uninstall --purge)');
    } catch (e) {
      if (!(e instanceof StateDirBusyError)) throw e;
      console.log(`uninstall --purge refused, nothing removed: ${e.message}`);
      return 1;
    }
  }
  let r: UninstallReport;
  try {
    r = await uninstall({
      stateDir: cfg.stateDir,
      dbPath: cfg.dbPath,
      socket: cfg.socket,
      drainTimeoutMs: cfg.drainTimeoutMs,
      purge: cfg.purge,
      log,
      interruptible: true,
    });
  } catch (e) {
    if (e instanceof LockTimeoutError) return lockTimeout('uninstall', e, log);
    throw e;
  } finally {
    owner?.release();
  }
  printUninstall(r, cfg.stateDir, cfg.purge);
  return r.refused.length > 0 || r.superseded || (cfg.purge && r.spooled.length > 0) ? 1 : 0;
}
