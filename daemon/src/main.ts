// The stewardd process: subcommand dispatch and signals. Everything else is in daemon.ts.

import { createDaemonLogger } from './log.js';
import { parseProbeArgs, parseRunConfig, PROBE_USAGE, RUN_USAGE } from './config.js';
import { INSTALL_USAGE, parseInstallConfig, parseUninstallConfig, UNINSTALL_USAGE } from './lifecycle/command-line.js';
import { avoidExitHang } from '@cni-steward/shared';

// Before the commands load their modules: no compile job may be left on a V8 worker at exit (shared/src/exit-hang.ts).
avoidExitHang();

const USAGE = `usage: stewardd <command> [options]
commands:
  run          serve CNI requests on the Unix socket (stewardd run --help)
  install      put the shim and 00-steward.conflist on this node (stewardd install --help)
  uninstall    drain, then remove exactly what install added (stewardd uninstall --help)
  probe        GET /healthz or /readyz on the socket, for exec probes (stewardd probe --help)
  status       counts, teardown queue, failing and abandoned teardowns (--check: exit 1 if any abandoned)
  attachments  list attachments: --state S, --pod NAMESPACE/NAME, --container ID
  teardowns    pending and abandoned teardown steps
  retry        run pending teardowns now
  audit        leases, cache files, portmap rules and attachments no live sandbox owns (--release frees them)
  version      print the version
status, attachments, teardowns, retry and audit print tables, or the API's JSON with -o json (<command> --help)`;

/** Each subcommand's usage, printed for `<command> --help` before anything else is loaded. */
const HELP: Record<string, string> = {
  run: RUN_USAGE,
  install: INSTALL_USAGE,
  uninstall: UNINSTALL_USAGE,
  probe: PROBE_USAGE,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const help = command === undefined ? undefined : HELP[command];
  if (help !== undefined && rest.includes('--help')) {
    console.log(help);
    return 0;
  }
  switch (command) {
    case 'run': {
      const cfg = parseRunConfig(rest);
      // Loaded here, not at the top: `probe` runs every few seconds and needs none of it.
      const { startDaemon, traceLogFields } = await import('./daemon.js');
      // Every line logged within a traced request names its trace (tracing/context.ts).
      const { log, sink } = createDaemonLogger(cfg.logLevel, traceLogFields);
      const daemon = await startDaemon(cfg, log, sink);
      for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void daemon.close(sig));
      await daemon.closed;
      return 0;
    }
    case 'install':
      return (await import('./lifecycle/commands.js')).runInstall(parseInstallConfig(rest));
    case 'uninstall':
      return (await import('./lifecycle/commands.js')).runUninstall(parseUninstallConfig(rest));
    case 'probe':
      return (await import('./lifecycle/commands.js')).runProbe(parseProbeArgs(rest));
    case 'status':
    case 'attachments':
    case 'teardowns':
    case 'retry':
    case 'audit': {
      const { runCli } = await import('./cli/index.js');
      return runCli(command, rest);
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
