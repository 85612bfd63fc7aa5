// Opening the journal from a test process. better-sqlite3 12 on Node >= 24.19 aborts the process
// (SIGABRT, "Assertion failed: (env) != nullptr") when a GC finalises a Database or Statement
// outside any JS context, e.g. at exit: daemon/src/store/retain.ts says why the daemon keeps every
// one. A test process that opens the journal to look inside keeps them the same way, statements
// prepared on it (and by db.pragma, which prepares through db.prepare) included.

import Database from 'better-sqlite3';
import { retain } from '../../daemon/src/store/retain.js';

export function openDatabase(path: string, options?: Database.Options): Database.Database {
  const db = retain(new Database(path, options));
  const prepare = db.prepare.bind(db) as (...args: unknown[]) => unknown;
  db.prepare = ((...args: unknown[]) => retain(prepare(...args))) as typeof db.prepare;
  return db;
}
