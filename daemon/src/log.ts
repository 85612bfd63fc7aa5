// The one place stewardd's pino loggers are made: JSON lines with an ISO-8601 UTC `time`
// ("2026-11-23T18:40:00.123Z") and the level as a word (`"level":"warn"`), so a person or
// `jq 'select(.level=="error")'` reads them without a table of pino's numbers. README "Logs".

import { pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

export function createLogger(level: string, dest?: DestinationStream): Logger {
  const opts = {
    level,
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return dest ? pino(opts, dest) : pino(opts);
}
