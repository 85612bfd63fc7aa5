// Runs one delegate plugin for one CNI command: finds it, builds its environment (only the CNI
// variables and PATH, and TRACEPARENT/TRACESTATE when a trace is active: tracing/), hands it to the
// spawner process (spawner.ts, which runs it without a shell in its own process group under a
// deadline), and decodes what it printed into a result or a CniError. While traces are exported,
// each run is a span (`delegate bridge ADD`) under the request's.

import type { Logger } from 'pino';
import {
  CniError,
  ErrorCode,
  UNCODED_FAILURE_SUFFIX,
  podFromCniArgs,
  podLogFields,
  type CniCommand,
} from '@cni-steward/shared';
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { findPlugin, missingPluginCode, pluginSearchPath } from './lookup.js';
import type { PluginProcess } from './process-group.js';
import { Spawner } from './spawner.js';
import type { DelegateTrace } from '../tracing/delegate.js';
import type { Tracing } from '../tracing/tracing.js';

export type { PluginProcess } from './process-group.js';

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
  /**
   * Told the plugin's process (pid, start time, boot id) as soon as it exists, before its outcome:
   * the engine journals it, so that recovery can kill the group if the daemon dies meanwhile.
   */
  onStart?: (p: PluginProcess) => void;
  /**
   * What is left of the request's answer budget (ms): the plugin's deadline is the smaller of this
   * and the daemon's --plugin-timeout, so the answer always leaves before the shim's bound.
   */
  budgetMs?: number;
}

export interface ExecutorOptions {
  binDirs: readonly string[];
  timeoutMs: number;
  /** PATH given to plugins (they exec iptables, ip, ...). */
  path: string;
  log: Logger;
  /** Cap on captured stdout/stderr, so a chatty plugin cannot exhaust memory. */
  maxOutputBytes?: number;
  /** Each run's part of the trace (tracing/); without, none and no TRACEPARENT. */
  tracing?: Pick<Tracing, 'delegate'>;
}

export type PluginRunner = (call: PluginCall) => Promise<unknown>;

/** Runs a host tool (iptables-save, ...) found on the plugins' PATH; resolves with its stdout. */
export type ToolRunner = (name: string, args: readonly string[], timeoutMs?: number) => Promise<string>;

/** The tool is not installed: in none of the directories of the plugins' PATH. */
export class ToolMissing extends Error {}

/** Runs plugins; resolves with the decoded stdout (undefined when empty), rejects with a CniError. */
export class PluginExecutor {
  private readonly opts: ExecutorOptions;

  private readonly spawner: Spawner;

  constructor(opts: ExecutorOptions) {
    this.opts = opts;
    this.spawner = new Spawner(opts.log);
  }

  /** Relative CNI_PATH entries already warned about (bounded, so a hostile runtime cannot grow it). */
  private readonly warnedRelative = new Set<string>();

  private readonly ignoredRelative = (entry: string): void => {
    if (this.warnedRelative.has(entry)) return;
    if (this.warnedRelative.size >= 256) this.warnedRelative.clear();
    this.warnedRelative.add(entry);
    this.opts.log.warn(
      { entry: entry.slice(0, 256) },
      "relative CNI_PATH entry ignored: it would resolve against stewardd's working directory",
    );
  };

  /** The executable a plugin type resolves to for a request's CNI_PATH. */
  readonly locate = (type: string, cniPath: string): string =>
    findPlugin(type, pluginSearchPath(this.opts.binDirs, cniPath, this.ignoredRelative));

  readonly run: PluginRunner = (call) => {
    const dirs = pluginSearchPath(this.opts.binDirs, call.cniPath, this.ignoredRelative);
    const file = findPlugin(call.type, dirs, missingPluginCode(call.command));
    const env = {
      CNI_COMMAND: call.command,
      CNI_CONTAINERID: call.containerId,
      CNI_NETNS: call.netns,
      CNI_IFNAME: call.ifname,
      CNI_ARGS: call.args,
      CNI_PATH: dirs.join(':'),
      PATH: this.opts.path,
    };
    const t = this.opts.tracing?.delegate({
      type: call.type,
      command: call.command,
      containerId: call.containerId,
      ifname: call.ifname,
      network: typeof call.stdin.name === 'string' ? call.stdin.name : undefined,
    });
    if (t === undefined) return this.execute(file, call, env);
    // Exactly TRACEPARENT and TRACESTATE (when the context has one), as libcni gives its plugins.
    const traced = { ...call, onStart: t.onStart(call.onStart) };
    return this.execute(file, traced, { ...env, ...t.env }, t).then(
      (out) => {
        t.end();
        return out;
      },
      (e: unknown) => {
        t.end(e);
        throw e;
      },
    );
  };

  /**
   * A host tool the daemon itself needs (the audit reads portmap's rules with iptables-save): looked
   * up on the PATH plugins get, run through the same spawner under the plugin deadline. A non-zero
   * exit, a timeout or a spawn failure rejects with what the tool said.
   */
  readonly runTool: ToolRunner = async (name, args, timeoutMs = this.opts.timeoutMs) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`"${name}" is not a tool name`);
    const dirs = this.opts.path.split(':').filter((d) => isAbsolute(d));
    const file = dirs.map((d) => join(d, name)).find((f) => isExecutable(f));
    if (file === undefined) throw new ToolMissing(`${name} is in none of ${dirs.join(':')}`);
    const o = await this.spawner.run({
      file,
      args: [...args],
      env: { PATH: this.opts.path, LC_ALL: 'C' },
      stdin: '',
      timeoutMs,
      maxOutputBytes: this.opts.maxOutputBytes ?? 64 * 1024 * 1024,
    });
    const label = [name, ...args].join(' ');
    if (o.spawnError !== undefined) throw new Error(`cannot execute ${label}: ${o.spawnError}`);
    if (o.timedOut) throw new Error(`${label} did not finish within ${timeoutMs} ms and was killed`);
    if (o.overflow) throw new Error(`${label} printed more than the output cap`);
    if (o.code !== 0)
      throw new Error(
        `${label} ${o.signal ? `was killed by ${o.signal}` : `exited with status ${o.code}`}: ${o.stderr.trim().slice(-500)}`,
      );
    return o.stdout;
  };

  /** Undefined while plugins can be started (the spawner answers, or a new one does); else why not. */
  health(timeoutMs?: number): Promise<string | undefined> {
    return this.spawner.health(timeoutMs);
  }

  /** Starts the spawner process ahead of the first plugin call (Spawner.warm). */
  warm(): void {
    this.spawner.warm();
  }

  close(): void {
    this.spawner.close();
  }

  private async execute(
    file: string,
    call: PluginCall,
    env: Record<string, string>,
    trace?: DelegateTrace,
  ): Promise<unknown> {
    const { log } = this.opts;
    const budgeted = call.budgetMs !== undefined && call.budgetMs < this.opts.timeoutMs;
    const timeoutMs = budgeted ? Math.max(1, Math.floor(call.budgetMs as number)) : this.opts.timeoutMs;
    const maxOutputBytes = this.opts.maxOutputBytes ?? 4 * 1024 * 1024;
    const label = `${call.type} ${call.command}`;
    const o = await this.spawner.run(
      { file, env, stdin: JSON.stringify(call.stdin), timeoutMs, maxOutputBytes },
      call.onStart,
    );
    trace?.exited(o);
    const stdout = o.stdout.trim();
    const stderr = o.stderr.trim();
    if (stderr !== '')
      log.debug(
        {
          containerId: call.containerId,
          ...podLogFields(podFromCniArgs(call.args)),
          plugin: call.type,
          command: call.command,
          stderr,
        },
        'plugin stderr',
      );
    if (o.spawnError !== undefined)
      throw new CniError(ErrorCode.PluginExecFailed, `cannot execute plugin ${call.type}: ${o.spawnError}`);
    if (o.timedOut)
      throw new CniError(
        ErrorCode.PluginTimeout,
        `plugin ${label} did not finish within ${timeoutMs} ms and was killed` +
          (budgeted ? " (what was left of the request's answer budget)" : ''),
      );
    if (o.overflow)
      throw new CniError(
        ErrorCode.PluginExecFailed,
        `plugin ${label} wrote more than ${maxOutputBytes} bytes to stdout`,
      );
    if (o.code === 0) {
      if (stdout === '') return undefined;
      try {
        return JSON.parse(stdout);
      } catch {
        throw new CniError(
          ErrorCode.PluginExecFailed,
          `plugin ${label} succeeded but printed invalid JSON`,
          stdout.slice(0, 500),
        );
      }
    }
    throw decodeFailure(label, o.code, o.signal, stdout, stderr);
  }
}

/** A failed plugin should print a CNI error on stdout; otherwise say what we saw. */
function decodeFailure(
  label: string,
  code: number | null,
  signal: NodeJS.Signals | null,
  stdout: string,
  stderr: string,
): CniError {
  try {
    const parsed = CniError.fromJSON(JSON.parse(stdout));
    if (parsed) return parsed;
  } catch {
    /* not JSON */
  }
  const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
  const detail = (stderr || stdout).slice(-500);
  return new CniError(
    ErrorCode.PluginExecFailed,
    `plugin ${label} ${how} ${UNCODED_FAILURE_SUFFIX}`,
    detail || undefined,
  );
}

function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
