// The only module that spawns processes: runs one delegate plugin for one CNI command.
// No shell; only the CNI variables and PATH in its environment; its own process group, so a
// deadline kills the plugin and anything it started (bridge runs host-local as a child).

import { spawn } from 'node:child_process';
import type { Logger } from 'pino';
import { CniError, ErrorCode, type CniCommand } from '@cni-steward/shared';
import { findPlugin, pluginSearchPath } from './lookup.js';

export interface PluginCall {
  command: CniCommand;
  type: string;
  containerId: string;
  netns: string;
  ifname: string;
  args: string;
  /** The request's CNI_PATH; searched after the daemon's bin dirs. */
  cniPath: string;
  /** The plugin's stdin: its config with name, cniVersion and prevResult injected. */
  stdin: Record<string, unknown>;
}

export interface ExecutorOptions {
  binDirs: readonly string[];
  timeoutMs: number;
  /** PATH given to plugins (they exec iptables, ip, ...). */
  path: string;
  log: Logger;
  /** Cap on captured stdout/stderr, so a chatty plugin cannot exhaust memory. */
  maxOutputBytes?: number;
}

export type PluginRunner = (call: PluginCall) => Promise<unknown>;

/** Runs plugins; resolves with the decoded stdout (undefined when empty), rejects with a CniError. */
export class PluginExecutor {
  private readonly opts: ExecutorOptions;
  /** Executions started since the daemon came up, for metrics. */
  executions = 0;

  constructor(opts: ExecutorOptions) {
    this.opts = opts;
  }

  /** The executable a plugin type resolves to for a request's CNI_PATH. */
  readonly locate = (type: string, cniPath: string): string => findPlugin(type, pluginSearchPath(this.opts.binDirs, cniPath));

  readonly run: PluginRunner = (call) => {
    const dirs = pluginSearchPath(this.opts.binDirs, call.cniPath);
    const file = findPlugin(call.type, dirs);
    const env = {
      CNI_COMMAND: call.command,
      CNI_CONTAINERID: call.containerId,
      CNI_NETNS: call.netns,
      CNI_IFNAME: call.ifname,
      CNI_ARGS: call.args,
      CNI_PATH: dirs.join(':'),
      PATH: this.opts.path,
    };
    this.executions++;
    return this.spawnPlugin(file, call, env);
  };

  private spawnPlugin(file: string, call: PluginCall, env: Record<string, string>): Promise<unknown> {
    const { timeoutMs, log } = this.opts;
    const maxOut = this.opts.maxOutputBytes ?? 4 * 1024 * 1024;
    const label = `${call.type} ${call.command}`;
    return new Promise((resolve, reject) => {
      const child = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true, shell: false });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outBytes = 0;
      let errBytes = 0;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child.pid);
      }, timeoutMs);
      child.stdout.on('data', (b: Buffer) => { if ((outBytes += b.length) <= maxOut) out.push(b); });
      child.stderr.on('data', (b: Buffer) => { if ((errBytes += b.length) <= maxOut) err.push(b); });
      child.stdin.on('error', () => { /* plugin exited before reading stdin; its exit status says why */ });
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new CniError(ErrorCode.PluginExecFailed, `cannot execute plugin ${call.type}: ${e.message}`));
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        const stdout = Buffer.concat(out).toString('utf8').trim();
        const stderr = Buffer.concat(err).toString('utf8').trim();
        if (stderr !== '') log.debug({ containerId: call.containerId, plugin: call.type, command: call.command, stderr }, 'plugin stderr');
        if (timedOut) {
          reject(new CniError(ErrorCode.PluginTimeout, `plugin ${label} did not finish within ${timeoutMs} ms and was killed`));
          return;
        }
        if (outBytes > maxOut) {
          reject(new CniError(ErrorCode.PluginExecFailed, `plugin ${label} wrote more than ${maxOut} bytes to stdout`));
          return;
        }
        if (code === 0) {
          if (stdout === '') { resolve(undefined); return; }
          try {
            resolve(JSON.parse(stdout));
          } catch {
            reject(new CniError(ErrorCode.PluginExecFailed, `plugin ${label} succeeded but printed invalid JSON`, stdout.slice(0, 500)));
          }
          return;
        }
        reject(decodeFailure(label, code, signal, stdout, stderr));
      });
      child.stdin.end(JSON.stringify(call.stdin));
    });
  }
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}

/** A failed plugin should print a CNI error on stdout; otherwise say what we saw. */
function decodeFailure(label: string, code: number | null, signal: NodeJS.Signals | null, stdout: string, stderr: string): CniError {
  try {
    const parsed = CniError.fromJSON(JSON.parse(stdout));
    if (parsed) return parsed;
  } catch {
    /* not JSON */
  }
  const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
  const detail = (stderr || stdout).slice(-500);
  return new CniError(ErrorCode.PluginExecFailed, `plugin ${label} ${how} without a CNI error`, detail || undefined);
}
