// Which spooled DELs a spool dir holds, by container (the first 64 characters of its id, as spool
// file names carry it: shared/src/spool.ts SPOOL_NAME), for a request that must run its container's
// first (spool-dirs.ts spooledFor). Asked on every ADD and CHECK, so a dir is listed again only when
// it changed: its mtime moved, or the listing was made within MTIME_TICK_MS of that mtime (a file
// made later in the same timestamp tick would leave it unchanged).
//
// A request's answer is never older than the request: a DEL the runtime was told is done (spooled)
// before it sent this ADD must be found, or the next pass tears the new attachment down. Listing
// blocks the loop about 2 ms per 1,000 names, so a large dir (a backlog being drained, whose mtime
// moves with every file the drain removes; one first seen large by its size on disk) is read off the
// loop and its names sorted a chunk per turn (`current` answers a promise), one listing shared by
// every request that came before it started. `recent` may be a second old: for the dir's
// retirement check, where a listing that late only delays dropping it.

import { readdirSync, type BigIntStats } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { SPOOL_NAME } from '@cni-steward/shared';
import { statDir } from './spool-dir-check.js';

/** A dir's spooled DELs by container prefix. */
export type ByPrefix = Map<string, string[]>;

/** A dir's listing, kept while the dir's mtime is what it was then. */
interface Listing {
  mtimeNs: bigint;
  at: number;
  byPrefix: ByPrefix;
  /** The mtime was older than MTIME_TICK_MS when listed: a file made since changes it. */
  settled: boolean;
  /** Names in the dir (stale temp files and others too: each costs the listing as much). */
  size: number;
}

/**
 * How coarse a dir's mtime may be. Local file systems stamp it from a 1–10 ms clock, vfat from a
 * 2 s one; NFS clients cache it, so a spool dir must not be on NFS (docs/teardown.md).
 */
export const MTIME_TICK_MS = 2000;

/** Names in a dir past which it is listed off the loop (a backlog). */
export const LARGE_SPOOL = 2048;

/** A dir not listed yet is taken as large from this size on disk (2,048 names take 40 KiB or more). */
export const LARGE_DIR_BYTES = 40 * 1024;

/** Names sorted by container in one turn of the loop when listing off it. */
const NAMES_PER_TURN = 4096;

/** One dir's listing off the loop: the one running, and the one queued behind it for later callers. */
interface OffLoop {
  running?: Promise<ByPrefix | undefined>;
  queued?: Promise<ByPrefix | undefined>;
}

export class SpoolListings {
  private readonly listings = new Map<string, Listing>();
  private readonly offLoop = new Map<string, OffLoop>();

  /** `now`: the wall clock the file system's mtimes are compared with (tests fix it). */
  constructor(private readonly now: () => number = Date.now) {}

  /**
   * The names in `dir` now (undefined when it cannot be listed: not there yet, the shim makes it):
   * the kept listing while the dir is unchanged, a listing made now for a small dir, and for a large
   * one a promise of a listing started after this call. `stat`: the dir's, when the caller took it.
   */
  current(
    dir: string,
    stat: BigIntStats | undefined = statDir(dir),
  ): ByPrefix | undefined | Promise<ByPrefix | undefined> {
    const st = sizeOf(stat);
    if (st === undefined) return undefined;
    const kept = this.listings.get(dir);
    if (kept && kept.mtimeNs === st.mtimeNs && kept.settled) return kept.byPrefix;
    const large = kept === undefined ? st.size >= LARGE_DIR_BYTES : kept.size > LARGE_SPOOL;
    return large ? this.listSoon(dir) : this.listNow(dir, st.mtimeNs);
  }

  /** The names in `dir`, from a listing at most a second old when the dir is large. */
  recent(dir: string): ByPrefix | undefined {
    const st = sizeOf(statDir(dir));
    if (st === undefined) return undefined;
    const kept = this.listings.get(dir);
    if (kept && kept.mtimeNs === st.mtimeNs && kept.settled) return kept.byPrefix;
    if (kept && kept.size > LARGE_SPOOL && this.now() - kept.at < 1000) return kept.byPrefix;
    return this.listNow(dir, st.mtimeNs);
  }

  private listNow(dir: string, mtimeNs: bigint): ByPrefix | undefined {
    const at = this.now();
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return undefined;
    }
    return this.keep(dir, { mtimeNs, at }, byContainer(names, 0, names.length, new Map()), names.length);
  }

  /** A listing that starts after this call: the running one started earlier, so callers share the next. */
  private listSoon(dir: string): Promise<ByPrefix | undefined> {
    let o = this.offLoop.get(dir);
    if (o === undefined) this.offLoop.set(dir, (o = {}));
    const state = o;
    if (state.queued) return state.queued;
    const start = (): Promise<ByPrefix | undefined> => {
      state.queued = undefined;
      const p = this.listOffLoop(dir).finally(() => {
        if (state.running === p) state.running = undefined;
      });
      state.running = p;
      return p;
    };
    if (state.running === undefined) return start();
    state.queued = state.running.then(start, start);
    return state.queued;
  }

  private async listOffLoop(dir: string): Promise<ByPrefix | undefined> {
    const at = this.now();
    let mtimeNs: bigint;
    let names: string[];
    try {
      mtimeNs = (await stat(dir, { bigint: true })).mtimeNs;
      names = await readdir(dir);
    } catch {
      return undefined;
    }
    const byPrefix: ByPrefix = new Map();
    for (let i = 0; i < names.length; i += NAMES_PER_TURN) {
      if (i > 0) await new Promise((r) => setImmediate(r));
      byContainer(names, i, Math.min(names.length, i + NAMES_PER_TURN), byPrefix);
    }
    return this.keep(dir, { mtimeNs, at }, byPrefix, names.length);
  }

  /** Keeps a listing; `at` is when it began (before the mtime's stat): settled is judged from then. */
  private keep(dir: string, when: { mtimeNs: bigint; at: number }, byPrefix: ByPrefix, size: number): ByPrefix {
    const settled = when.at - Number(when.mtimeNs / 1_000_000n) > MTIME_TICK_MS;
    this.listings.set(dir, { mtimeNs: when.mtimeNs, at: when.at, byPrefix, settled, size });
    return byPrefix;
  }
}

/** names[from, to) that are spool files, added to `into` by container prefix. */
function byContainer(names: string[], from: number, to: number, into: ByPrefix): ByPrefix {
  for (let i = from; i < to; i++) {
    const name = names[i] as string;
    const prefix = SPOOL_NAME.exec(name)?.[2];
    if (prefix === undefined) continue;
    const list = into.get(prefix);
    if (list) list.push(name);
    else into.set(prefix, [name]);
  }
  return into;
}

/** The dir's mtime and size on disk, stat'ed before it is listed (a file made during the listing moves it again). */
function sizeOf(st: BigIntStats | undefined): { mtimeNs: bigint; size: number } | undefined {
  return st && { mtimeNs: st.mtimeNs, size: Number(st.size) };
}
