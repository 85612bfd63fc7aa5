// Opening the journal from a test process. better-sqlite3 12 on Node >= 24.19 aborts the process
// (SIGABRT, "Assertion failed: (env) != nullptr") when a GC finalises a Database or Statement
// outside any JS context, e.g. at exit: daemon/src/store/retain.ts says why the daemon keeps every
// one. A test process that opens the journal to look inside keeps them the same way, statements
// prepared on it (and by db.pragma, which prepares through db.prepare) included.

import { randomBytes } from 'node:crypto';
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { retain } from '../../daemon/src/store/retain.js';

export function openDatabase(path: string, options?: Database.Options): Database.Database {
  const db = retain(new Database(path, options));
  const prepare = db.prepare.bind(db) as (...args: unknown[]) => unknown;
  db.prepare = ((...args: unknown[]) => retain(prepare(...args))) as typeof db.prepare;
  return db;
}

/** Pads the journal with finished rows (so mid-file is table pages, not the header), then writes 8 KiB of garbage at its middle. */
export function corruptJournal(dbPath: string): void {
  const db = openDatabase(dbPath);
  const pad = 'p'.repeat(2000);
  db.transaction(() => {
    const ins =
      db.prepare(`INSERT INTO attachments (container_id, network, ifname, netns, cni_args, cni_path, cni_version, boot_id,
      state, config, created_at, updated_at) VALUES (?, 'pad', 'eth0', '', '', '', '1.0.0', 'b', 'deleted', ?, 0, 0)`);
    for (let i = 0; i < 300; i++) ins.run(`pad-${i}`, pad);
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  const at = Math.floor(statSync(dbPath).size / 2 / 4096) * 4096;
  const fd = openSync(dbPath, 'r+');
  try {
    writeSync(fd, randomBytes(8192), 0, 8192, at);
  } finally {
    closeSync(fd);
  }
}
