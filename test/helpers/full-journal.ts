// A journal statement that fails as a full disk makes it fail: SQLITE_FULL from the driver, which the
// store turns into code 11 (store/write-error.ts), on the in-memory Store the engine fakes use.

import type { Store } from '../../daemon/src/store/store.js';

type Statement = { run: (...a: unknown[]) => unknown; get: (...a: unknown[]) => unknown };

/** Makes `statement` fail while `full()` says so; the returned object counts the failures. */
export function fullDisk(store: Store, statement: string, full: () => boolean): { failures: number } {
  const stmts = (store as unknown as { stmt: Record<string, Statement> }).stmt;
  const s = stmts[statement];
  if (!s) throw new Error(`no journal statement ${statement}`);
  const seen = { failures: 0 };
  for (const m of ['run', 'get'] as const) {
    const real = s[m].bind(s);
    s[m] = (...a: unknown[]) => {
      if (full()) {
        seen.failures++;
        throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      }
      return real(...a);
    };
  }
  return seen;
}
