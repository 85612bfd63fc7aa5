// Which spooled DELs a spool dir holds, by container (the first 64 characters of its id, as spool
// file names carry it: shared/src/spool.ts SPOOL_NAME), for a request that must run its container's
// first (spool-dirs.ts spooledFor). Asked on every ADD and CHECK, so a dir is listed again only when
// it changed: its mtime moved, or the listing was made within one coarse timestamp tick of that
// mtime (a file made later in the same tick would leave it unchanged). A large dir (a backlog being
// drained) is listed at most once a second: each listing blocks the loop, about 2 ms per 1,000 names.

import { readdirSync, statSync } from 'node:fs';
import { SPOOL_NAME } from '@cni-steward/shared';

/** A dir's listing (SpoolListings.names), kept while the dir's mtime is what it was then. */
interface Listing {
  mtimeNs: bigint;
  at: number;
  byPrefix: Map<string, string[]>;
  /** The mtime was older than a coarse timestamp tick when listed: a file made since changes it. */
  settled: boolean;
  size: number;
}

/** File systems stamp a dir's mtime from a coarse clock (one tick, 1 to 10 ms): what is within it is not trusted. */
const MTIME_TICK_MS = 20;

/** Names in a dir past which it is listed at most once a second (a backlog). */
const LARGE_SPOOL = 2048;

export class SpoolListings {
  private readonly listings = new Map<string, Listing>();

  /** `now`: the wall clock the file system's mtimes are compared with (tests fix it). */
  constructor(private readonly now: () => number = Date.now) {}

  /** The names in `dir` by container prefix; undefined when it cannot be listed (not there yet: the shim makes it). */
  names(dir: string): Map<string, string[]> | undefined {
    let mtimeNs: bigint;
    try {
      mtimeNs = statSync(dir, { bigint: true }).mtimeNs;
    } catch {
      return undefined;
    }
    const now = this.now();
    const kept = this.listings.get(dir);
    if (kept && kept.mtimeNs === mtimeNs && kept.settled) return kept.byPrefix;
    if (kept && kept.size > LARGE_SPOOL && now - kept.at < 1000) return kept.byPrefix;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return undefined;
    }
    const byPrefix = new Map<string, string[]>();
    for (const name of names) {
      const prefix = SPOOL_NAME.exec(name)?.[2];
      if (prefix === undefined) continue;
      const list = byPrefix.get(prefix);
      if (list) list.push(name);
      else byPrefix.set(prefix, [name]);
    }
    const settled = now - Number(mtimeNs / 1_000_000n) > MTIME_TICK_MS;
    this.listings.set(dir, { mtimeNs, at: now, byPrefix, settled, size: names.length });
    return byPrefix;
  }
}
