// Root-free engine fixtures for the unit tests: a real Store on an in-memory SQLite database, a fake
// plugin runner that records every call and fails or waits on cue, and netconf/request builders.
// /proc/self/ns/net is a network namespace any user can name, so ADD's netns check passes without
// creating one.

import { pino, type Logger } from 'pino';

import type { CniRequestBody } from '@cni-steward/shared';
import type { RetryClock } from '../../daemon/src/engine/clock.js';
import { Engine, type DelPolicy, type EngineTrace } from '../../daemon/src/engine/engine.js';
import type { RetryPolicy } from '../../daemon/src/engine/teardown.js';
import type { MasqueradeRelease } from '../../daemon/src/engine/masquerade.js';
import type { PluginCall } from '../../daemon/src/plugins/executor.js';
import { Metrics } from '../../daemon/src/metrics.js';
import { Store } from '../../daemon/src/store/store.js';
import type { NewAttachment } from '../../daemon/src/store/types.js';

export const NETNS = '/proc/self/ns/net';
export const silentLog = pino({ level: 'silent' });

export type Behaviour = (call: PluginCall) => unknown | Promise<unknown>;

/** A plugin runner that records calls as "COMMAND type containerId" and answers per type. */
export class FakePlugins {
  readonly calls: string[] = [];
  readonly stdins: Record<string, unknown>[] = [];
  readonly full: PluginCall[] = [];
  private readonly behaviours = new Map<string, Behaviour>();

  on(type: string, b: Behaviour): void {
    this.behaviours.set(type, b);
  }

  readonly run = async (call: PluginCall): Promise<unknown> => {
    this.calls.push(`${call.command} ${call.type} ${call.containerId}`);
    this.stdins.push(call.stdin);
    this.full.push(call);
    const b = this.behaviours.get(call.type);
    if (b) return b(call);
    if (call.command === 'ADD') {
      const prev = call.stdin.prevResult as Record<string, unknown> | undefined;
      return (
        prev ?? {
          cniVersion: call.stdin.cniVersion,
          interfaces: [{ name: call.ifname }],
          ips: [{ address: '10.1.0.2/24' }],
        }
      );
    }
    return undefined;
  };

  of(command: string): string[] {
    return this.calls.filter((c) => c.startsWith(`${command} `));
  }

  /** The full calls of one command, in order. */
  callsOf(command: string): PluginCall[] {
    return this.full.filter((c) => c.command === command);
  }
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

export const TEST_RETRY: RetryPolicy = { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 5, maxAgeMs: 3_600_000 };

export interface SetupOptions {
  maxParallel?: number;
  bootId?: string;
  store?: Store;
  delPolicy?: DelPolicy;
  retry?: RetryPolicy;
  now?: () => number;
  /** The retry schedule's clock (wall and monotonic injected separately). */
  clock?: RetryClock;
  /** Plugin types that do not exist: locate throws for them. */
  missing?: string[];
  /** The engine's logger (silent when not given), for tests that read the rows an operator sees. */
  log?: Logger;
  /** What the engine tells tracing (engine.ts EngineTrace); none when not given. */
  trace?: EngineTrace;
  /** The host's network namespace (EngineContext.hostNetns); none when not given. */
  hostNetns?: string;
  /** Removes a masquerade chain left by a DEL without the netns (engine/masquerade.ts); none when not given. */
  masquerade?: MasqueradeRelease;
}

export function setup(opts: SetupOptions = {}) {
  const store = opts.store ?? new Store(':memory:');
  const plugins = new FakePlugins();
  const metrics = new Metrics(store);
  const located: string[] = [];
  const engine = new Engine({
    store,
    run: plugins.run,
    locate: (type, cniPath) => {
      located.push(`${type}@${cniPath}`);
      if (opts.missing?.includes(type)) throw new Error(`plugin ${type} not found`);
      return `/fake/${type}`;
    },
    log: opts.log ?? silentLog,
    metrics,
    bootId: opts.bootId ?? 'boot-1',
    maxParallel: opts.maxParallel ?? 4,
    delPolicy: opts.delPolicy ?? 'defer',
    retry: opts.retry ?? TEST_RETRY,
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.trace ? { trace: opts.trace } : {}),
    ...(opts.hostNetns !== undefined ? { hostNetns: opts.hostNetns } : {}),
    ...(opts.masquerade ? { masquerade: opts.masquerade } : {}),
  });
  return { store, plugins, engine, metrics, located };
}

export function conf(
  plugins: Array<Record<string, unknown>>,
  version = '1.0.0',
  delegates?: unknown[],
): Record<string, unknown> {
  return {
    cniVersion: version,
    name: 'net',
    type: 'steward',
    delegates: delegates ?? [{ name: 'pod', cniVersion: version, plugins }],
  };
}

export function req(
  command: string,
  containerId: string,
  config: Record<string, unknown>,
  env: Partial<CniRequestBody['env']> = {},
): CniRequestBody {
  return {
    env: {
      command: command as never,
      containerId,
      netns: NETNS,
      ifname: 'eth0',
      args: '',
      path: '/fake',
      ...env,
    },
    config,
  };
}

/** The value of a prom-client counter for one label set (0 when never incremented). */
export async function counterValue(
  counter: { get(): Promise<{ values: Array<{ value: number; labels: Record<string, unknown> }> }> },
  labels: Record<string, string>,
): Promise<number> {
  const { values } = await counter.get();
  const hit = values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
  return hit?.value ?? 0;
}

/** An attachment row as the engine would journal it, for tests that write the store directly. */
export function newAttachment(over: Partial<NewAttachment> = {}): NewAttachment {
  return {
    containerId: 'c',
    network: 'net',
    ifname: 'eth0',
    netns: '/ns',
    cniArgs: '',
    cniPath: '/p',
    cniVersion: '1.0.0',
    bootId: 'b1',
    config: '{}',
    ...over,
  };
}
