// Keeps 00-steward.conflist in step with the primary network config while the daemon runs: a
// CNI that writes its config late (Calico, Cilium) or changes it is followed within a second.
// fs.watch on the conf dir reacts at once; a 1 s rescan covers events inotify can miss (the
// dir replaced, overlay or network filesystems). Writes happen only while install's record
// says "installed", so an uninstall in progress is never undone.
//
// Each sync holds the install lock (lock.ts) and re-reads the record under it, so a concurrent
// `stewardd uninstall` cannot remove the conflist between our read and our write (which would
// leave a dangling config). The lock is only tried, never waited for: when install or uninstall
// holds it the round is skipped, and the next rescan (within rescanMs) tries again.

import { statfsSync, watch, type FSWatcher } from 'node:fs';
import type { Logger } from 'pino';
import { pluginsChainedAfterSteward, syncConflist, type ConflistOutcome } from './conflist-sync.js';
import { describeHolder, tryLock } from './lock.js';
import { readRecord, type InstallRecord } from './record.js';
import type { ConflistVersionChoice } from './cni-version.js';

export interface WatcherOptions {
  confDir: string;
  stateDir: string;
  /** The socket this daemon serves on: the conflist must point the shim at it. */
  socket: string;
  log: Logger;
  rescanMs?: number;
  debounceMs?: number;
  /** The conflist's cniVersion as this daemon chose it (cni-version.ts); absent: the record's. */
  versionChoice?: ConflistVersionChoice;
}

export class PrimaryWatcher {
  private fsw: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pending: NodeJS.Timeout | undefined;
  private ok = false;
  private lastReason = '';

  constructor(private readonly o: WatcherOptions) {}

  /** This daemon's own choice of the conflist's version, made once it serves: applied at once. */
  chooseVersion(choice: ConflistVersionChoice): void {
    this.o.versionChoice = choice;
    this.scan();
  }

  /** Ready: an install record exists and the conflist wraps a usable primary. */
  ready(): boolean {
    return this.ok;
  }

  /** Why it is not ready (the line it logged), for /readyz and /v1/status; undefined when it is. */
  problem(): string | undefined {
    if (this.ok) return undefined;
    return this.lastReason || 'not ready: the CNI conf dir has not been checked yet';
  }

  start(): void {
    this.scan();
    try {
      this.fsw = watch(this.o.confDir, { persistent: false }, () => this.soon());
      this.fsw.on('error', (e) =>
        this.o.log.warn({ err: e }, 'watching the CNI conf dir failed; relying on the periodic rescan'),
      );
    } catch (e) {
      this.o.log.warn({ err: e, dir: this.o.confDir }, 'cannot watch the CNI conf dir; relying on the periodic rescan');
    }
    this.timer = setInterval(() => this.scan(), this.o.rescanMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    this.fsw?.close();
    if (this.timer) clearInterval(this.timer);
    if (this.pending) clearTimeout(this.pending);
    this.fsw = this.timer = this.pending = undefined;
  }

  /** Editors and CNIs write in bursts; one scan after the burst is enough. */
  private soon(): void {
    if (this.pending) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      this.scan();
    }, this.o.debounceMs ?? 50);
    this.pending.unref();
  }

  private notReady(reason: string, fields: Record<string, unknown> = {}): void {
    this.ok = false;
    if (reason !== this.lastReason) this.o.log.warn({ ...fields, confDir: this.o.confDir }, reason);
    this.lastReason = reason;
  }

  /** Why this record is not ours to maintain from this daemon, or undefined if it is. */
  private notOurs(rec: InstallRecord | undefined): [string, Record<string, unknown>?] | undefined {
    if (!rec) return ['not ready: no install record; run `stewardd install` first'];
    if (rec.state !== 'installed') return ['not ready: uninstall in progress'];
    if (rec.cniConfDir !== this.o.confDir)
      return ['not ready: install recorded a different CNI conf dir', { recorded: rec.cniConfDir }];
    if (rec.socket !== this.o.socket) {
      return [
        'not ready: install recorded a different daemon socket',
        { recorded: rec.socket, serving: this.o.socket },
      ];
    }
    return undefined;
  }

  scan(): void {
    try {
      // A first look without the lock: a node with nothing of ours to maintain never takes it.
      const skip = this.notOurs(readRecord(this.o.stateDir));
      if (skip) return this.notReady(...skip);
      const r = tryLock(this.o.stateDir, 'watcher');
      if ('busy' in r) {
        this.o.log.debug(
          { holder: r.busy },
          `install lock held by ${describeHolder(r.busy)}; retrying on the next rescan`,
        );
        return;
      }
      try {
        // Again under the lock: uninstall may have marked or removed the record since.
        const rec = readRecord(this.o.stateDir);
        const gone = this.notOurs(rec);
        if (gone) return this.notReady(...gone);
        this.report(syncConflist(this.o.stateDir, this.withVersion(rec!), false).outcome);
      } finally {
        r.held.release();
      }
    } catch (e) {
      this.notReady(failedScan(e, [this.o.stateDir, this.o.confDir]), { err: e });
    }
  }

  /**
   * The record with this daemon's own conflist-version choice (made once it serves, asking the
   * runtime): a runtime downgraded below a 1.1.0 conflist since install gets the primary's version
   * back at the scan that follows the runtime's answer. An explicit mode in the record
   * (an operator's install) is kept unless this daemon's own mode is explicit too.
   */
  private withVersion(rec: InstallRecord): InstallRecord {
    const choice = this.o.versionChoice;
    if (choice === undefined || JSON.stringify(rec.cniVersion) === JSON.stringify(choice)) return rec;
    // An operator's explicit `stewardd install --cni-version X` stands against this daemon's `auto`:
    // it is the way out when auto picks what a runtime refuses.
    if (choice.mode === 'auto' && rec.cniVersion !== undefined && rec.cniVersion.mode !== 'auto') return rec;
    // So does the runtime an operator named with install's --runtime-endpoint against this daemon
    // seeing several sockets and asking none (it would put the primary's version back at every start).
    if (choice.runtimeSockets !== undefined && rec.cniVersion?.mode === 'auto' && rec.cniVersion.endpointGiven)
      return rec;
    const was = rec.conflist?.cniVersion;
    const now = choice.version ?? "the primary's";
    if (was !== undefined && was !== choice.version)
      this.o.log.warn({ was, now, reason: choice.reason }, 'conflist version changes');
    return { ...rec, cniVersion: choice };
  }

  private report(c: ConflistOutcome): void {
    switch (c.status) {
      case 'written':
      case 'unchanged':
        if (c.status === 'written')
          this.o.log.info(
            { primary: c.primary, cniVersion: c.cniVersion },
            'primary network config or version changed; 00-steward.conflist regenerated',
          );
        this.ok = true;
        this.lastReason = '';
        return;
      case 'no-primary':
        return this.notReady('not ready: no primary network config in the CNI conf dir yet');
      case 'invalid-primary':
        return this.notReady('not ready: the primary network config is not usable', { primary: c.primary, why: c.why });
      case 'foreign': {
        // A plugin that chains itself into the first config by name (Istio's CNI in chained mode)
        // lands in ours: said by name, with the way out, rather than only "rewritten".
        const added = pluginsChainedAfterSteward(c.path);
        if (added === undefined || added.length === 0)
          return this.notReady('not ready: 00-steward.conflist was rewritten by someone else; leaving it alone', {
            path: c.path,
          });
        return this.notReady(
          `not ready: 00-steward.conflist was rewritten by someone else, who chained ${added.join(', ')} after steward; leaving it alone: configure that plugin to chain itself into the primary network config instead (which steward runs as its delegate), then run stewardd install --force`,
          { path: c.path },
        );
      }
    }
  }
}

/**
 * Why a scan failed, naming a full disk: the record and the lock live in the state dir, which the
 * journal and the DEL spool share, so an operator must see the disk, not a conflist problem. A write
 * through a descriptor names no path: then the dir whose file system has no block left is named.
 */
function failedScan(e: unknown, dirs: string[]): string {
  const { code, path } = (e ?? {}) as NodeJS.ErrnoException;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return 'not ready: regenerating the conflist failed';
  const where = path ?? dirs.find(noBlockLeft) ?? dirs.join(' or ');
  return `not ready: no space left on the disk of ${where} (${code}): the conflist cannot be kept up to date, and the journal and DEL spool there cannot be written`;
}

function noBlockLeft(dir: string): boolean {
  try {
    return statfsSync(dir).bavail === 0;
  } catch {
    return false;
  }
}
