// Is the shim installed on the node this daemon's own? (issue 21 item 3.) A shim from another
// release talks a protocol this daemon may not speak (routes/protocol.ts refuses it per request);
// this check makes the node say so before any pod tries: /readyz fails and
// steward_installed_shim_mismatch is 1 until `stewardd install` puts the daemon's own shim back.
//
// The installed shim is the one install recorded (record.ts: its path in the CNI bin dir); the
// daemon's own is --shim (default shim-path.ts defaultShim, as install's). Checked at start and
// every second, cheaply: the installed file is hashed only when its stat (size, mtime, inode) changed.
//
// Both files are read with files.ts's checks (issue 28 item 3): only a regular file, never blocking,
// at most MAX_SHIM_BYTES, hashed a chunk at a time. The installed one is re-hashed asynchronously
// (sha256RegularFileAsync: the event loop turns between 1 MiB chunks), one check at a time: a
// 250 MiB file touched every second is re-hashed every second, and that held the loop ~230 ms each
// time when the hash was synchronous (issue 41). Anything else at the installed
// path (a FIFO, a link to a device, a directory, a file over the bound, one that cannot be read) is
// not this daemon's shim: not ready with the reason, never a frozen loop, a heap of bytes or a silent
// "no mismatch". A missing one is put back (restoreShim) when the daemon maintains the node's files.

import { existsSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import { MAX_REGULAR_FILE_BYTES, readRegularFile, sha256, sha256RegularFile, sha256RegularFileAsync } from './files.js';
import { tryLock } from './lock.js';
import { readRecord, realFileOps, trackedWrite, type InstallRecord } from './record.js';

export const SHIM_CHECK_INTERVAL_MS = 1000;
/** The largest shim hashed: Bun's build is 104-111 MB, the Go one a few MB. */
export const MAX_SHIM_BYTES = MAX_REGULAR_FILE_BYTES;

export interface ShimCheckOptions {
  stateDir: string;
  /** This daemon's own shim (what its `stewardd install` copies). */
  ownShim: string;
  log: Logger;
  intervalMs?: number;
  /**
   * Put this daemon's own shim back when the installed one is missing while the record says
   * installed (an operator's clean-up of the bin dir, a node image refresh): until then every pod's
   * ADD fails, and readiness failing re-runs no init container. Only a missing file: another build
   * there is a rollout's, said and left alone.
   */
  restoreMissing?: boolean;
}

export class ShimCheck {
  private readonly own: string | undefined;
  private seen:
    { path: string; stamp: string; sha: string } | { path: string; stamp: string; unreadable: string } | undefined;
  private why: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The check under way: a tick that finds one running skips (no two hashes of the file at once). */
  private running: Promise<void> | undefined;
  private hashes = 0;
  private restoreFailed: string | undefined;
  private restoreBackoffMs = 0;
  private restoreAfter = 0;

  constructor(private readonly o: ShimCheckOptions) {
    try {
      this.own = sha256RegularFile(o.ownShim, MAX_SHIM_BYTES);
    } catch (e) {
      // Nothing to compare with: the check is off, said once.
      o.log.warn(
        { shim: o.ownShim, err: (e as Error).message },
        "cannot read this stewardd's own shim; the installed shim is not compared with it",
      );
    }
  }

  /**
   * The first check hashes synchronously, as the daemon starts serving: settled within the microtasks
   * the caller awaits, so no request is answered ready before it is known whether the installed shim
   * is ours. The checks after it hash asynchronously (a re-hash never blocks the loop).
   */
  start(): Promise<void> {
    const first = this.check(true);
    this.timer = setInterval(() => void this.check(), this.o.intervalMs ?? SHIM_CHECK_INTERVAL_MS);
    this.timer.unref();
    return first;
  }

  /** How many times the installed file was hashed (its stat changed): for tests and debugging. */
  hashed(): number {
    return this.hashes;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** 1 when the installed shim is another build than this daemon's, else 0 (steward_installed_shim_mismatch). */
  mismatch(): number {
    return this.why === undefined ? 0 : 1;
  }

  /** Why the daemon must not be ready, or undefined. */
  problem(): string | undefined {
    return this.why;
  }

  /** One check; while one is under way, that one (the file is never hashed twice at once). */
  check(sync = false): Promise<void> {
    this.running ??= this.checkOnce(sync).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** `restored`: the shim was just put back (restore), so it is not put back again in this check. */
  private async checkOnce(sync: boolean, restored = false): Promise<void> {
    if (this.own === undefined) return;
    let path: string;
    let installed: boolean;
    try {
      const rec = readRecord(this.o.stateDir);
      if (rec === undefined) return this.set(undefined);
      path = rec.shim.path;
      installed = rec.state === 'installed';
    } catch (e) {
      this.o.log.debug({ err: e }, 'cannot read the install record; shim check skipped this round');
      return;
    }
    let stamp: string;
    try {
      const st = statSync(path);
      stamp = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    } catch (e) {
      // No installed shim: the runtime cannot call us at all, and every pod's ADD fails on a missing
      // `steward` while our conflist is in place. Said so while installed (uninstall removes it on
      // purpose); nothing else said it (hostile run, 1 Dec: /readyz stayed 200). Put back when asked
      // to and nothing is there (ENOENT: not a path we cannot search or a link loop someone left).
      this.seen = undefined;
      if (!installed) return this.set(undefined);
      const absent = (e as NodeJS.ErrnoException).code === 'ENOENT';
      if (this.o.restoreMissing && absent && !restored && this.restore(path)) return this.checkOnce(sync, true);
      return this.set(missingShim(path));
    }
    if (this.seen?.path !== path || this.seen.stamp !== stamp) {
      try {
        this.hashes++;
        const sha = sync ? sha256RegularFile(path, MAX_SHIM_BYTES) : await sha256RegularFileAsync(path, MAX_SHIM_BYTES);
        this.seen = { path, stamp, sha };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
          this.seen = undefined;
          return this.set(installed ? missingShim(path) : undefined);
        }
        this.seen = { path, stamp, unreadable: (e as Error).message };
      }
    }
    const seen = this.seen;
    if ('unreadable' in seen)
      return this.set(
        `installed shim ${path} cannot be checked: ${seen.unreadable}; it is not this stewardd's shim: run stewardd install / roll the DaemonSet`,
      );
    this.set(
      seen.sha === this.own
        ? undefined
        : `installed shim ${path} sha256 ${seen.sha} is not this stewardd's (${this.own}): run stewardd install / roll the DaemonSet`,
    );
  }

  /**
   * restoreShim, its failure logged once until it changes or succeeds, and tried again after 1 s,
   * then twice as long each time up to a minute (a read-only bin dir is not rewritten every second:
   * each try reads and writes the whole shim on the event loop); whether the shim was put back.
   */
  private restore(path: string): boolean {
    if (Date.now() < this.restoreAfter) return false;
    const failed = restoreShim(this.o, path);
    if (failed === LOCK_BUSY) return false; // install or uninstall at work: the next tick, unsaid
    if (failed !== undefined && failed !== this.restoreFailed)
      this.o.log.error({ path }, `installed shim ${path} is missing and could not be put back: ${failed}`);
    this.restoreFailed = failed;
    this.restoreBackoffMs = failed === undefined ? 0 : Math.min(60_000, Math.max(1000, this.restoreBackoffMs * 2));
    this.restoreAfter = Date.now() + this.restoreBackoffMs;
    return failed === undefined;
  }

  private set(why: string | undefined): void {
    if (why === this.why) return;
    if (why !== undefined) this.o.log.error({ ownShim: this.o.ownShim }, why);
    else if (this.why !== undefined) this.o.log.info("the installed shim is this stewardd's own again");
    this.why = why;
  }
}

/** The readiness problem of an installed shim that is not there. */
function missingShim(path: string): string {
  return `installed shim ${path} is missing: the runtime cannot run steward, and every pod's ADD fails while 00-steward.conflist names it: run stewardd install / roll the DaemonSet`;
}

/**
 * Writes `o.ownShim` at `path` if it is still missing, holding the install lock with the record read
 * again under it and still naming `path` as installed (so an uninstall removing it is never undone),
 * the record naming the new sha256 before the file is written (trackedWrite, as install writes it).
 * The lock is only tried. Returns why it was not put back (the lock busy, the record changed, the
 * write failed: the next tick tries again), or undefined once it is.
 */
const LOCK_BUSY = 'the install lock is held';

function restoreShim(o: ShimCheckOptions, path: string): string | undefined {
  try {
    const lock = tryLock(o.stateDir, 'restoring the missing shim');
    if ('busy' in lock) return LOCK_BUSY;
    try {
      const rec = readRecord(o.stateDir);
      if (rec?.state !== 'installed' || rec.shim.path !== path) return 'the install record changed';
      if (existsSync(path)) return undefined;
      const bytes = readRegularFile(o.ownShim, MAX_SHIM_BYTES);
      const next: InstallRecord = { ...rec, shim: { path, sha256: sha256(bytes) } };
      trackedWrite(o.stateDir, realFileOps, next, path, bytes, 0o755, next);
    } finally {
      lock.held.release();
    }
    o.log.warn({ path, ownShim: o.ownShim }, `installed shim ${path} was missing; put this stewardd's own back`);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
