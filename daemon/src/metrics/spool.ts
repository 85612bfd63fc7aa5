// The DEL spool's metrics: the DELs the shim spooled and the daemon has not ingested yet (counted in
// the spool dirs at each scrape), and the stale temp files of killed writers the sweep removed.

import { opendirSync } from 'node:fs';
import { Counter, type Registry } from 'prom-client';
import { scrapedGauge } from './registry.js';

/** Spool files the shim wrote that the daemon has not ingested yet; 0 when the dir does not exist. */
export function countSpooled(dir: string): number {
  // Iterated, not listed at once: a backlog can be 100,000 files.
  let d;
  try {
    d = opendirSync(dir, { bufferSize: 256 });
  } catch {
    return 0;
  }
  let n = 0;
  try {
    for (let e = d.readSync(); e !== null; e = d.readSync()) if (e.name.endsWith('.json')) n++;
  } finally {
    d.closeSync();
  }
  return n;
}

export class SpoolMetrics {
  /** Stale temp files the spool dirs' sweep removed (spool-dirs.ts). */
  readonly tempFilesRemoved: Counter;
  private spoolDirs: (() => readonly string[]) | undefined;

  /** `spoolDir`: the dir counted until setSpoolDirs names them all. */
  constructor(registry: Registry, spoolDir: string | undefined) {
    this.tempFilesRemoved = new Counter({
      name: 'steward_spool_temp_files_removed_total',
      help: 'Spool temp files (.<name>.tmp) left by a writer killed mid-write, removed once older than 10 minutes',
      registers: [registry],
    });
    scrapedGauge(
      registry,
      'steward_spool_pending_dels',
      'DELs the shim spooled while the daemon was unreachable, not ingested yet',
      (g) => {
        const dirs = this.spoolDirs?.() ?? (spoolDir === undefined ? [] : [spoolDir]);
        g.set(dirs.reduce((n, d) => n + countSpooled(d), 0));
      },
    );
  }

  /** The dirs steward_spool_pending_dels counts (spool-dirs.ts: every one drained). */
  setSpoolDirs(dirs: () => readonly string[]): void {
    this.spoolDirs = dirs;
  }
}
