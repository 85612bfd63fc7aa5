// A real pino logger whose rows (info and up) a test reads back, parsed: what an operator would see
// in the daemon's log, without a file.

import { pino } from 'pino';

export type LogRow = Record<string, unknown> & { level: number; msg: string };

export function captureLog() {
  const rows: LogRow[] = [];
  const log = pino(
    { level: 'info', base: undefined, timestamp: false },
    { write: (s: string) => void rows.push(JSON.parse(s) as LogRow) },
  );
  /** The rows with this message, without it (their level kept). */
  const withLevel = (msg: string) => rows.filter((r) => r.msg === msg).map(({ msg: _m, ...rest }) => rest);
  /** The rows with this message, their fields only (no level, no message). */
  const of = (msg: string) => rows.filter((r) => r.msg === msg).map(({ level: _l, msg: _m, ...rest }) => rest);
  return { log, rows, of, withLevel };
}
