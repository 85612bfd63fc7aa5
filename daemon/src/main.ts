// The stewardd process: subcommand dispatch and signals. Everything else is in daemon.ts.

import { pino } from 'pino';
import { parseRunConfig, RUN_USAGE } from './config.js';
import { startDaemon } from './daemon.js';

const USAGE = `usage: stewardd <command> [options]
commands:
  run        serve CNI requests on the Unix socket (stewardd run --help)
  version    print the version`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'run': {
      if (rest.includes('--help')) { console.log(RUN_USAGE); return 0; }
      const cfg = parseRunConfig(rest);
      const log = pino({ level: cfg.logLevel });
      const daemon = await startDaemon(cfg, log);
      for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void daemon.close(sig));
      await daemon.closed;
      return 0;
    }
    case 'version': {
      const { VERSION } = await import('./version.js');
      console.log(VERSION);
      return 0;
    }
    case undefined:
    case '--help':
    case 'help':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`stewardd: unknown command "${command}"\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`stewardd: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
