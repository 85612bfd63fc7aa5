// What SIGTERM means for the node: `kubectl delete` of the DaemonSet (uninstall, so the node is
// left as it was) or anything else — rolling update, node drain, eviction, crash loop — where
// everything must stay in place. Only the API server knows which; when it cannot be asked, stay.

import type { Logger } from 'pino';
import { purgeStateDir, uninstall } from './uninstall.js';
import { readRecord } from './record.js';
import { join } from 'node:path';
import { DEFAULT_SOCKET } from '@cni-steward/shared';
import { describeHolder, LockTimeoutError, tryLock } from './lock.js';
import { STEWARD_CONFLIST, stewardConflistPlugins } from './conflist.js';
import { moveAside } from './files.js';
import { daemonSetState, podOfDaemonSet, type ApiAccess } from './k8s.js';
import type { UninstallMode } from './options.js';

export interface TermDecision {
  uninstall: boolean;
  why: string;
}

/** `api` is undefined when not running in a cluster (no service-account token). */
export async function decideOnTerm(
  mode: UninstallMode,
  api: ApiAccess | undefined,
  log: Logger,
): Promise<TermDecision> {
  let d: TermDecision;
  if (mode === 'always') d = { uninstall: true, why: '--uninstall-on-delete=always' };
  else if (mode === 'never') d = { uninstall: false, why: '--uninstall-on-delete=never' };
  else if (!api)
    d = { uninstall: false, why: 'not running in a cluster (no service-account token); leaving the node as it is' };
  else {
    const s = await daemonSetState(api);
    const ds = `${api.namespace}/${api.daemonSet}`;
    switch (s.kind) {
      case 'absent':
        d = podOfDaemonSet(api)
          ? { uninstall: true, why: `DaemonSet ${ds} no longer exists` }
          : {
              uninstall: false,
              why: `DaemonSet ${ds} does not exist, but this pod (${api.podName}) is not one of its pods: --daemonset or STEWARD_DAEMONSET names another DaemonSet than this pod's (its pods are named <daemonset>-<suffix>); leaving everything in place`,
            };
        break;
      case 'deleting':
        d = { uninstall: true, why: `DaemonSet ${ds} is being deleted (since ${s.deletionTimestamp})` };
        break;
      case 'present':
        d = {
          uninstall: false,
          why: `DaemonSet ${ds} still exists (rolling update, drain or restart); leaving everything in place`,
        };
        break;
      case 'unknown':
        d = {
          uninstall: false,
          why: `cannot tell whether DaemonSet ${ds} still exists (${s.why}); leaving everything in place`,
        };
        break;
    }
  }
  log.info({ mode, uninstall: d.uninstall }, `on SIGTERM: ${d.why}`);
  return d;
}

export interface TermUninstallOptions {
  mode: UninstallMode;
  api: ApiAccess | undefined;
  /** --cni-conf-dir: where 00-steward.conflist is set aside when the uninstall fails. */
  cniConfDir?: string | undefined;
  stateDir: string;
  dbPath: string;
  socket: string;
  drainTimeoutMs: number;
  log: Logger;
}

/**
 * Run on SIGTERM while the daemon still serves DELs (so teardowns that drain the queue can still
 * arrive; ADD and CHECK are answered with CNI error 11, try again later): decide, and if the
 * DaemonSet is going away, drain and remove our files. Returns what to do once the database is
 * closed: purge the state dir, but only if nothing was left pending (else a reinstall resumes it).
 * uninstall holds the install lock itself (waiting for it if a CLI run holds it; the watcher is
 * stopped by then); the purge takes it again, without waiting: if someone else holds it by then,
 * they are installing again, and the state dir stays.
 */
export async function uninstallOnTerm(o: TermUninstallOptions, onUninstall?: () => void): Promise<() => void> {
  const d = await decideOnTerm(o.mode, o.api, o.log);
  if (!d.uninstall) return () => undefined;
  onUninstall?.();
  const r = await uninstallOrSetAside(o);
  // A DEL spooled in the last moments and not run yet is kept too: its file is its only record.
  // A journal whose teardowns could not even be read (a corrupt one, one from a newer release) is
  // purged with the rest, as `uninstall --purge` does: kept, a reinstall would find it and serve
  // degraded, never ready; the log said what it could not read (uninstall.ts drainFirst).
  if (r.refused.length > 0 || r.leftovers.length > 0 || r.spooled.length > 0 || r.superseded) {
    o.log.warn(
      {
        stateDir: o.stateDir,
        refused: r.refused.length,
        leftovers: r.leftovers.length,
        spooled: r.spooled.length,
        superseded: !!r.superseded,
      },
      'keeping the state dir: uninstall was incomplete, or stewardd was installed again meanwhile',
    );
    return () => undefined;
  }
  return () => {
    const r = tryLock(o.stateDir, 'purge on SIGTERM');
    if ('busy' in r) {
      o.log.warn(
        { stateDir: o.stateDir },
        `keeping the state dir: the install lock is held by ${describeHolder(r.busy)}`,
      );
      return;
    }
    try {
      // Installed again since the uninstall (a new DaemonSet's pod while this one stops): its
      // record, journal and spool are the new install's now.
      if (readRecord(o.stateDir) !== undefined) {
        o.log.warn({ stateDir: o.stateDir }, 'keeping the state dir: stewardd was installed again since the uninstall');
        return;
      }
      if (!purgeStateDir(r.held)) {
        o.log.warn(
          { stateDir: o.stateDir },
          'keeping the state dir: another stewardd took the install lock while it was being removed',
        );
        return;
      }
    } finally {
      r.held.release();
    }
    o.log.info(
      { stateDir: o.stateDir },
      'state dir purged (removed, or emptied where it is a mount point); the node is as it was before install',
    );
  };
}

/**
 * uninstall, for a DaemonSet going away. When it fails, a config naming steward would stop every new
 * pod once this stewardd is gone: whatever failed (an unreadable record), that file at least goes
 * aside before the error is passed on. Not when the lock was busy: its holder is installing or
 * uninstalling, and owns the files.
 */
async function uninstallOrSetAside(o: TermUninstallOptions): Promise<Awaited<ReturnType<typeof uninstall>>> {
  try {
    return await uninstall({
      stateDir: o.stateDir,
      dbPath: o.dbPath,
      socket: o.socket,
      drainTimeoutMs: o.drainTimeoutMs,
      purge: false,
      log: o.log,
    });
  } catch (e) {
    if (!(e instanceof LockTimeoutError) && o.cniConfDir !== undefined)
      conflistAside(o.stateDir, o.cniConfDir, o.socket, o.log);
    throw e;
  }
}

/** What a running daemon's close() passes: the config fields of the SIGTERM decision and uninstall. */
export interface TermConfig {
  uninstallOnDelete: UninstallMode;
  api: ApiAccess | undefined;
  cniConfDir?: string | undefined;
  stateDir: string;
  dbPath: string;
  socket: string;
  drainTimeoutMs: number;
}

/** What the SIGTERM step decided: whether the node is being uninstalled, and what to run once closed. */
export interface TermOutcome {
  uninstalling: boolean;
  afterClose: () => void;
}

/**
 * The SIGTERM step of a running daemon's close(), healthy or degraded alike: uninstallOnTerm when
 * the reason is SIGTERM, else nothing. Never rejects: a failed uninstall leaves the node as it is, but
 * for our conflist, set aside (conflistAside) unless the install lock was busy.
 * `onUninstall` is told as soon as the decision is to uninstall, before the drain.
 */
export async function onTermStep(
  cfg: TermConfig,
  reason: string,
  log: Logger,
  onUninstall?: () => void,
): Promise<TermOutcome> {
  if (reason !== 'SIGTERM') return { uninstalling: false, afterClose: () => undefined };
  let uninstalling = false;
  try {
    const afterClose = await uninstallOnTerm(
      {
        mode: cfg.uninstallOnDelete,
        api: cfg.api,
        cniConfDir: cfg.cniConfDir,
        stateDir: cfg.stateDir,
        dbPath: cfg.dbPath,
        socket: cfg.socket,
        drainTimeoutMs: cfg.drainTimeoutMs,
        log,
      },
      () => {
        uninstalling = true;
        onUninstall?.();
      },
    );
    return { uninstalling, afterClose };
  } catch (e) {
    log.error({ err: e }, 'uninstall on SIGTERM failed; leaving the rest of the node as it is');
    return { uninstalling, afterClose: () => undefined };
  }
}

/**
 * The last resort of a failed uninstall on SIGTERM: 00-steward.conflist in `confDir` moved aside
 * (renamed `….edited-<time>`, as uninstall does with a file someone edited) if it is a steward config
 * pointing at `socket`, holding the install lock (only tried: a holder owns the files). Never throws.
 */
export function conflistAside(stateDir: string, confDir: string, socket: string, log: Logger): void {
  const path = join(confDir, STEWARD_CONFLIST);
  try {
    const held = tryLock(stateDir, 'setting the conflist aside after a failed uninstall');
    if ('busy' in held) return;
    try {
      const ours = stewardConflistPlugins(path)?.[0];
      if (!ours || (ours.socket ?? DEFAULT_SOCKET) !== socket) return;
      const to = moveAside(path);
      log.warn(
        { path, to },
        'the uninstall failed, so 00-steward.conflist was only moved aside: no config names steward once this stewardd is gone',
      );
    } finally {
      held.held.release();
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      log.error({ path, err: e }, 'the uninstall failed, and 00-steward.conflist could not be moved aside either');
  }
}
