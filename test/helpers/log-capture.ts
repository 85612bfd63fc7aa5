// A real pino logger whose rows (info and up) a test reads back, parsed: what an operator would see
// in the daemon's log, without a file.

import { pino } from 'pino';

export type LogRow = Record<string, unknown> & { level: number; msg: string };

export function captureLog() {
  const rows: LogRow[] = [];
  const waiters: Array<{ msg: string; resolve: () => void }> = [];
  const log = pino(
    { level: 'info', base: undefined, timestamp: false },
    {
      write(s: string) {
        const row = JSON.parse(s) as LogRow;
        rows.push(row);
        for (const w of waiters.filter((x) => x.msg === row.msg)) w.resolve();
      },
    },
  );
  /** The rows with this message, without it (their level kept). */
  const withLevel = (msg: string) => rows.filter((r) => r.msg === msg).map(({ msg: _m, ...rest }) => rest);
  /** The rows with this message, their fields only (no level, no message). */
  const of = (msg: string) => rows.filter((r) => r.msg === msg).map(({ level: _l, msg: _m, ...rest }) => rest);
  /** Resolves once a row with this message has been logged (at once if one was). */
  const waitFor = (msg: string) =>
    rows.some((r) => r.msg === msg)
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiters.push({ msg, resolve }));
  return { log, rows, of, withLevel, waitFor };
}
