// The stewardd process: subcommand dispatch and signals. Everything else is in daemon.ts.

import { avoidExitHang } from '@cni-steward/shared';
import { parseProbeArgs, PROBE_USAGE, runProbe } from './probe.js';
import type { FailedBeforeServing } from './lifecycle/failed-start.js';

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

/** Each subcommand's usage, printed for `<command> --help` before its work is loaded. */
const HELP: Record<string, () => Promise<string>> = {
  run: async () => (await import('./config.js')).RUN_USAGE,
  install: async () => (await import('./lifecycle/command-line.js')).INSTALL_USAGE,
  uninstall: async () => (await import('./lifecycle/command-line.js')).UNINSTALL_USAGE,
  probe: async () => PROBE_USAGE,
};

// Every command loads what it needs when it runs: `probe` runs every few seconds (probe.ts).
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const help = command === undefined ? undefined : HELP[command];
  if (help !== undefined && rest.includes('--help')) return print(await help());
  switch (command) {
    case 'probe':
      return runProbe(parseProbeArgs(rest));
    case 'run':
      return runDaemon(rest);
    case 'install': {
      const cfg = (await import('./lifecycle/command-line.js')).parseInstallConfig(rest);
      return (await import('./lifecycle/commands.js')).runInstall(cfg);
    }
    case 'uninstall': {
      const cfg = (await import('./lifecycle/command-line.js')).parseUninstallConfig(rest);
      return (await import('./lifecycle/commands.js')).runUninstall(cfg);
    }
    case 'status':
    case 'attachments':
    case 'teardowns':
    case 'retry':
    case 'audit': {
      const { runCli } = await import('./cli/index.js');
      return runCli(command, rest);
    }
    case 'version': {
      if (rest.length > 0) {
        if (rest.length === 1 && ['--help', '-h'].includes(rest[0] ?? '')) return print('usage: stewardd version');
        console.error(`stewardd version takes no arguments, got "${rest.join(' ')}"\nusage: stewardd version`);
        return 2;
      }
      const { VERSION } = await import('./version.js');
      return print(VERSION);
    }
    case undefined:
      console.error(USAGE);
      return 2;
    case '--help':
    case 'help':
      return print(USAGE);
    default:
      console.error(`stewardd: unknown command "${command}"\n${USAGE}`);
      return 2;
  }
}

/**
 * Prints what a command answers: 0, or 6 when stdout cannot take it (a full disk, a closed pipe),
 * as the CLI's commands do; a script reading `stewardd version` must not take nothing for an answer.
 */
async function print(text: string): Promise<number> {
  const [{ writeStdout }, { CliError }] = await Promise.all([import('./cli/stdout.js'), import('./cli/client.js')]);
  try {
    await writeStdout(text);
    return 0;
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    console.error(`stewardd: ${err.message}`);
    return err.exitCode;
  }
}

/** `stewardd run`: serves until a signal closes it. */
async function runDaemon(rest: string[]): Promise<number> {
  const cfg = (await import('./config.js')).parseRunConfig(rest);
  const { createDaemonLogger } = await import('./log.js');
  // Loaded here, not at the top: `probe` runs every few seconds and needs none of it.
  const { startDaemon, traceLogFields } = await import('./daemon.js');
  // Every line logged within a traced request names its trace (tracing/context.ts).
  const { log, sink } = createDaemonLogger(cfg.logLevel, traceLogFields);
  // A signal while stewardd starts (recovery after a reboot can take minutes) is kept, not fatal:
  // what SIGTERM calls for (the uninstall of a deleted DaemonSet, seed 001) needs a serving
  // daemon, so it is carried out as soon as one serves. A second signal ends the start at once.
  let early: NodeJS.Signals | undefined;
  const onEarly = (sig: NodeJS.Signals) => {
    if (early !== undefined) process.exit(sig === 'SIGINT' ? 130 : 143);
    early = sig;
    log.warn({ signal: sig }, `${sig} while starting: stewardd stops as soon as it serves (a second one stops it now)`);
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, onEarly);
  let daemon: Awaited<ReturnType<typeof startDaemon>>;
  try {
    daemon = await startDaemon(cfg, log, sink);
  } catch (err) {
    const { afterFailedStart, waitsAfterFailedStart } = await import('./lifecycle/failed-start.js');
    if (!waitsAfterFailedStart(err, cfg)) throw err;
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.off(sig, onEarly);
    await afterFailedStart(cfg, err as FailedBeforeServing, early, log);
    return 1;
  }
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.off(sig, onEarly);
    process.once(sig, () => void daemon.close(sig));
  }
  if (early !== undefined) void daemon.close(early);
  await daemon.closed;
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`stewardd: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
