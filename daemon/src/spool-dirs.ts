// Every spool dir a DEL can be spooled to is drained, and kept clean (issue "spool hygiene").
// One concern: which dirs are drained and each kept clean (the drain itself is engine/spool.ts).
//
// Which dirs: the daemon's own (--spool-dir, default <state-dir>/spool) and the one its install
// record names (<state-dir>/install.json `spoolDir`, where the shim spools; a DEL spooled there was
// once answered 0 and never run). The record is read again every second, and a dir it stops naming
// is still drained for RETIRED_DIR_MS, since a shim that read the old conflist may still spool
// there. Each dir is scanned before the socket opens (its containers held, engine/spool.ts
// SpoolDrain) and drained in the background after; then every second (the retry scheduler's tick
// drains the daemon's own dir, engine/scheduler.ts; this module's rounds drain the others). A named
// dir that cannot be drained (not a directory, a link to nothing, cannot be listed, another user
// could write to it: spool-dir-check.ts) or an install record that cannot be read makes the daemon
// not ready, with the reason. A named dir not there yet is made, 0700, as the shim would.
//
// Stale temp files: a writer (the shim, or a degraded daemon's shared/src/spool.ts) killed between
// creating `.<stem>.tmp` and renaming it leaves the temp file for good (18 of 200 shims killed at
// random moments did). Every SWEEP_EVERY_MS each drained dir's regular files named like one
// (SPOOL_TEMP_NAME) and older than STALE_TEMP_GRACE_MS by mtime are removed, counted
// (steward_spool_temp_files_removed_total) and logged; younger ones may have a live writer and are
// left (spool-temps.ts). (Not in engine/spool.ts: engine/ is in the mutation run's scope, docs/mutation.md.)

import type { BigIntStats } from 'node:fs';
import { resolve } from 'node:path';
import { CniError, ErrorCode } from '@cni-steward/shared';
import type { Logger } from 'pino';
import type { Engine } from './engine/engine.js';
import { SpoolDrain, ingestNames, ingestSpool } from './engine/spool.js';
import { CheckedDirs, makeMissing, sharedDirProblem, spoolDirProblem, statDir } from './spool-dir-check.js';
import { type ByPrefix, SpoolListings } from './spool-listing.js';
import { STALE_TEMP_GRACE_MS, sweepStaleTemps } from './spool-temps.js';
import { readRecord, recordPath } from './lifecycle/record.js';

/**
 * A dir no longer named is drained this long after it last was: a shim that read the old conflist
 * spools at the end of its run at the latest, its stdin bound and its DEL bound (at most
 * MAX_SHIM_DEL_TIMEOUT_MS, the longest `timeouts.del` a netconf may set) together well under this,
 * so none can still spool there after it.
 */
export const RETIRED_DIR_MS = 10 * 60_000;

/** How often the named dirs are read again, checked and drained (the dirs other than --spool-dir). */
export const SPOOL_DIRS_INTERVAL_MS = 1000;

/** How often the stale temp files are looked for: each look lists every dir (a backlog can be 100,000 files). */
export const SWEEP_EVERY_MS = 60_000;

/** Why a request waits: its container's spooled DELs kept (their teardown could not be journaled) run first. */
const keptMessage = (n: number) =>
  `${n} DEL(s) of this container spooled earlier could not be run yet (stewardd could not journal their teardown); they run first: try again later`;

/** What one dir's SpoolDrain holds: the containers with spooled DELs there, until drained. */
type Hold = (containerId: string) => Promise<void> | undefined;

/**
 * The engine as one dir's SpoolDrain sees it (it sets spoolHold for the containers its dir holds
 * and clears it once drained): a spoolHold of its own; the engine's is all of them (SpoolDirs.scan).
 */
function engineFor(engine: Engine): { view: Engine; hold: Hold } {
  let own: Hold | undefined;
  const view: Pick<Engine, 'spooledDel' | 'spooledDelJournaled' | 'spoolHold'> = {
    spooledDel: (req) => engine.spooledDel(req),
    spooledDelJournaled: (req) => engine.spooledDelJournaled(req),
    get spoolHold() {
      return own;
    },
    set spoolHold(h) {
      own = h;
    },
  };
  return { view: view as unknown as Engine, hold: (id) => own?.(id) };
}

export interface SpoolDirsOptions {
  engine: Engine;
  /** --spool-dir (the retry scheduler's tick drains it too). */
  own: string;
  /** The state dir whose install record names the shim's spool dir. */
  stateDir: string;
  log: Logger;
  /** Told how many stale temp files a sweep removed (steward_spool_temp_files_removed_total). */
  onTempRemoved?: (n: number) => void;
  tempGraceMs?: number;
  intervalMs?: number;
  sweepEveryMs?: number;
  now?: () => number;
}

export class SpoolDirs {
  /** Every dir named, and when it last was. */
  private readonly named = new Map<string, { by: string; at: number; round: number }>();
  private rounds = 0;
  /** Until the first refresh (scan, before the socket opens): --spool-dir alone, as before. */
  private drainable: string[];
  private why: string[] = [];
  private readonly drains: Array<{ drain: SpoolDrain; hold: Hold }> = [];
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private lastSweep = -Infinity;
  private readonly now: () => number;

  constructor(private readonly o: SpoolDirsOptions) {
    this.now = o.now ?? Date.now;
    this.drainable = [resolve(o.own)];
  }

  /** The dirs drained now (steward_spool_pending_dels counts their files). */
  dirs(): readonly string[] {
    return this.drainable;
  }

  /** Why the daemon must not be ready: each named dir that cannot be drained, or the record unreadable. */
  problems(): string[] {
    return this.why;
  }

  /** Spooled DELs found at start and not drained yet, over every dir. */
  get pending(): number {
    return this.drains.reduce((n, d) => n + d.drain.pending, 0);
  }

  /**
   * Reads the install record again, checks every dir named, and returns those that can be drained. A
   * dir named now that cannot be drained is a problem; one named earlier (within RETIRED_DIR_MS) is
   * drained if it can be, and otherwise skipped: no DEL can be spooled there any more once its last
   * shim is done, and an install that fixed the name makes the daemon ready again at once.
   */
  refresh(): readonly string[] {
    const at = this.now();
    const round = ++this.rounds;
    const why: string[] = [];
    const own = resolve(this.o.own);
    this.named.set(own, { by: '--spool-dir', at, round });
    const record = recordPath(this.o.stateDir);
    let confDir: string | undefined;
    try {
      const rec = readRecord(this.o.stateDir);
      confDir = rec?.cniConfDir;
      const dir = rec?.spoolDir;
      if (dir !== undefined && resolve(dir) !== own)
        this.named.set(resolve(dir), { by: `install record ${record}`, at, round });
    } catch (e) {
      why.push(`cannot read the install record ${record} for the spool dir the shim uses: ${(e as Error).message}`);
    }
    const drainable: string[] = [];
    for (const [dir, n] of this.named) {
      // Dropped once no shim can spool there, unless spooled DELs (their only record) wait there.
      if (at - n.at > RETIRED_DIR_MS && !this.holdsSpooled(dir)) {
        this.named.delete(dir);
        continue;
      }
      // Made now if it is not there yet (as the shim would, 0700): a dir a user other than root made
      // first, under a parent anyone may write to (/tmp), is refused below and never drained.
      if (n.round === round) makeMissing(dir);
      const problem = sharedDirProblem(dir, this.o.stateDir, confDir) ?? spoolDirProblem(dir);
      if (problem === undefined) {
        drainable.push(dir);
        this.checked.passed(dir);
      } else if (n.round === round)
        why.push(
          `spool dir ${dir} (named by ${n.by}) cannot be drained: ${problem}; a DEL the shim spools there would never run`,
        );
    }
    this.report(why);
    this.drainable = drainable;
    return drainable;
  }

  /** The dirs as each passed its check: a pass or a request asks again with one stat (spool-dir-check.ts). */
  private readonly checked = new CheckedDirs();

  /** Whether `dir` may be drained now, as a pass or a request starts (the round's verdict is up to a second old). */
  drainableNow(dir: string, st?: BigIntStats): boolean {
    return this.drainable.includes(dir) && this.checked.stillGood(dir, st);
  }

  /** Whether `dir` holds spooled DELs (its listing, kept while the dir is unchanged). */
  private holdsSpooled = (dir: string) => (this.listings.recent(dir)?.size ?? 0) > 0;

  private report(why: string[]): void {
    if (why.join('\n') === this.why.join('\n')) return;
    for (const w of why) if (!this.why.includes(w)) this.o.log.error(w);
    if (why.length === 0) this.o.log.info('every spool dir named can be drained again');
    this.why = why;
  }

  /**
   * Before the socket opens: lists every drainable dir (names only) and holds the containers with
   * spooled DELs there; returns how many DELs wait.
   */
  scan(): number {
    const { engine, log } = this.o;
    let total = 0;
    for (const dir of this.refresh()) {
      const { view, hold } = engineFor(engine);
      const drain = new SpoolDrain(view, dir, log);
      total += drain.scan();
      this.drains.push({ drain, hold });
    }
    engine.spoolHold = this.requestHold;
    return total;
  }

  /**
   * What a request waits for: the start-up drain's hold for its container (the DELs the scan counted),
   * then its container's DELs spooled since (spooledFor).
   */
  private readonly requestHold: Hold = (containerId) => {
    const held = this.hold(containerId);
    if (held === undefined) return this.spooledFor(containerId);
    return held.then(() => this.spooledFor(containerId));
  };

  /**
   * A request's container with DELs spooled while stewardd served (the shim gave up on a slow DEL,
   * or the socket was unreachable) and not run yet: they run first. The runtime was told that DEL
   * was done before it sent this ADD (a reused container id: podman restart), so ingested up to a
   * second later by a pass, it would tear the new attachment down. Each dir (one stat) is listed
   * again only when its mtime changed (spool-listing.ts), a large one off the loop, waited for.
   */
  private readonly spooledFor: Hold = (containerId) => {
    const dirs = this.drainable.map((dir) => ({ dir, st: statDir(dir) })).filter((d) => this.drainableNow(d.dir, d.st));
    const listed = dirs.map(({ dir, st }) => ({ dir, byPrefix: this.listings.current(dir, st) }));
    if (!listed.some((l) => l.byPrefix instanceof Promise))
      return this.runSpooled(containerId, listed as Array<{ dir: string; byPrefix: ByPrefix | undefined }>);
    return Promise.all(listed.map(async (l) => ({ dir: l.dir, byPrefix: await l.byPrefix }))).then((all) =>
      this.runSpooled(containerId, all),
    );
  };

  /** Runs the container's DELs found in the listings, before its request. */
  private runSpooled(
    containerId: string,
    listed: Array<{ dir: string; byPrefix: ByPrefix | undefined }>,
  ): Promise<void> | undefined {
    const prefix = containerId.slice(0, 64);
    const found: Array<{ dir: string; names: string[] }> = [];
    for (const { dir, byPrefix } of listed) {
      const names = byPrefix?.get(prefix);
      if (names !== undefined && names.length > 0) found.push({ dir, names: [...names].sort() });
    }
    if (found.length === 0) return undefined;
    this.o.log.info(
      { containerId, spooled: found.reduce((n, f) => n + f.names.length, 0) },
      "the container's spooled DELs run before its request",
    );
    // A pass that fails (the dir cannot be read) does not fail the request; a DEL kept (its teardown
    // could not be journaled) does: the request would come before it.
    return Promise.all(found.map((f) => ingestNames(this.o.engine, f.dir, f.names, this.o.log))).then(
      (reports) => {
        const kept = reports.reduce((n, r) => n + (r.kept ?? 0), 0);
        if (kept > 0) throw new CniError(ErrorCode.TryAgainLater, keptMessage(kept));
      },
      (e: unknown) => {
        this.o.log.error(
          { containerId, err: (e as Error).message },
          "the container's spooled DELs could not all be run before its request; the next pass retries them",
        );
      },
    );
  }

  /** Each dir's spooled DELs by container, listed again only when the dir changed. */
  private readonly listings = new SpoolListings();

  /** Held until every dir's drain has reached this container's spooled DELs. */
  private readonly hold: Hold = (containerId) => {
    const held = this.drains.map((d) => d.hold(containerId)).filter((p) => p !== undefined);
    if (held.length === 0) return undefined;
    // Why an ADD after a restart is slow to answer, for whoever reads a debug log.
    this.o.log.debug({ containerId }, "a request waits for its container's spooled DELs");
    return held.length === 1 ? held[0] : Promise.all(held).then(() => undefined);
  };

  /** After the socket opens: drains what scan() found in the background, then every second. */
  start(): Promise<void> {
    const started = Promise.all(this.drains.map((d) => d.drain.start())).then(() => undefined);
    this.timer = setInterval(() => {
      this.round ??= this.tick().finally(() => (this.round = undefined));
    }, this.o.intervalMs ?? SPOOL_DIRS_INTERVAL_MS);
    this.timer.unref();
    return started;
  }

  /** Stops the rounds; resolves once the one running (if any) is done. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  /** One round: the dirs named now, each but --spool-dir drained, and every dir swept when due. */
  async tick(): Promise<void> {
    const { engine, log } = this.o;
    try {
      const dirs = this.refresh();
      const own = resolve(this.o.own);
      for (const dir of dirs) {
        if (dir === own || !this.drainableNow(dir)) continue;
        const r = await ingestSpool(engine, dir, log);
        if (r.ingested + r.rejected > 0) log.info({ ...r, spoolDir: dir }, 'spooled DELs ingested');
      }
      if (this.now() - this.lastSweep >= (this.o.sweepEveryMs ?? SWEEP_EVERY_MS)) {
        this.lastSweep = this.now();
        for (const dir of dirs) await this.sweep(dir);
      }
    } catch (e) {
      log.error({ err: (e as Error).message }, 'spool dirs round failed; tried again in a second');
    }
  }

  /** Removes the stale temp files of one dir, counted and logged. */
  async sweep(dir: string): Promise<number> {
    const graceMs = this.o.tempGraceMs ?? STALE_TEMP_GRACE_MS;
    const removed = await sweepStaleTemps(dir, graceMs, this.now());
    if (removed.length > 0) {
      this.o.onTempRemoved?.(removed.length);
      this.o.log.warn(
        { spoolDir: dir, removed: removed.length, files: removed.slice(0, 10), graceMs },
        `removed ${removed.length} stale spool temp files: left by writers killed mid-write, older than ${graceMs / 60_000} min`,
      );
    }
    return removed.length;
  }
}
