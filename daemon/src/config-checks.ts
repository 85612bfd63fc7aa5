// The checks of `stewardd run`'s values that only `run` needs (config.ts reads the flags; flags.ts
// holds the checks every parser shares): the deadline chain, the --audit-* durations, the
// --metrics-listen address, and where traces go (--otlp-endpoint and the OTEL_* environment).
// Each reports into `problems`, so every bad value is told at once.

import { DEFAULT_SHIM_TIMEOUT_MS } from '@cni-steward/shared';
import { ANSWER_MARGIN_MS } from './engine/answer-budget.js';
import { parseListenAddress, type ListenAddress } from './metrics-listener.js';
import { int } from './flags.js';
import { parseDuration } from './audit/options.js';

/** Where and how spans are exported (tracing/export.ts); off while `url` is undefined. */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string | undefined;
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  exportTimeoutMs: number;
}

/**
 * The deadline chain, ordered: one plugin's deadline must fit in the ADD answer budget (the shim's
 * default ADD bound less the answer margin), or a hanging plugin's 101 would reach the runtime as
 * the shim's 11. Longer chains are cut by the budget itself (engine/answer-budget.ts answerBudgetMs).
 */
export function checkDeadlineChain(pluginTimeoutMs: number, problems: string[]): void {
  const budgetMs = DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS;
  if (pluginTimeoutMs > budgetMs)
    problems.push(
      `--plugin-timeout ${pluginTimeoutMs / 1000} s does not fit under the shim's ADD bound: at most ${budgetMs / 1000} s (the shim's default ${DEFAULT_SHIM_TIMEOUT_MS / 1000} s less ${ANSWER_MARGIN_MS / 1000} s to answer)`,
    );
}

/** The longest a Node timer waits: beyond 2^31-1 ms it fires after 1 ms instead. 596h is under it. */
export const MAX_TIMER_MS = 596 * 3_600_000;

/** A --audit-* duration (`90s`, `15m`, `2h`, `1h30m`) from minMs to maxMs; `fallback` when absent. */
export function duration(
  flag: string,
  raw: string | undefined,
  fallback: number | undefined,
  minMs: number,
  problems: string[],
  maxMs = Infinity,
): number | undefined {
  if (raw === undefined) return fallback;
  const ms = parseDuration(raw);
  if (ms === undefined || ms < minMs || ms > maxMs) {
    const bounds = [
      minMs > 0 ? `at least ${minMs / 1000}s` : '',
      maxMs < Infinity ? `at most ${maxMs / 3_600_000}h` : '',
    ]
      .filter((b) => b !== '')
      .join(', ');
    problems.push(
      `--${flag} must be a duration such as 90s, 15m, 2h or 1h30m${bounds === '' ? '' : ` (${bounds})`}, got "${raw}"`,
    );
    return fallback;
  }
  return ms;
}

/** The OTLP/HTTP traces URL from a base URL (…/v1/traces appended, as for OTEL_EXPORTER_OTLP_ENDPOINT). */
function tracesUrl(base: string): string {
  if (/\/v1\/traces\/?$/.test(new URL(base).pathname)) return base;
  return `${base.endsWith('/') ? base : `${base}/`}v1/traces`;
}

/** An OTEL_* number (milliseconds or a count) >= min, or the fallback; a bad one is reported. */
function otelNumber(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    problems.push(`${name} must be an integer >= ${min}, got "${raw}"`);
    return fallback;
  }
  return n;
}

/**
 * Tracing: --otlp-endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as given), else
 * OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces appended); the environment's unless OTEL_SDK_DISABLED=true
 * or OTEL_TRACES_EXPORTER=none. The batch processor's knobs from --otlp-queue-size and OTEL_BSP_*.
 */
export function tracingConfig(
  flag: string | undefined,
  queueFlag: string | undefined,
  env: NodeJS.ProcessEnv,
  problems: string[],
): TracingConfig {
  const envOff = env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.trim() === 'none';
  const specific = envOff ? undefined : env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined;
  const general = envOff ? undefined : env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || undefined;
  const [what, raw] =
    flag !== undefined
      ? ['--otlp-endpoint', flag]
      : specific !== undefined
        ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', specific]
        : ['OTEL_EXPORTER_OTLP_ENDPOINT', general];
  let url: string | undefined;
  if (raw !== undefined) {
    let ok = false;
    try {
      ok = ['http:', 'https:'].includes(new URL(raw).protocol);
    } catch {
      /* not a URL */
    }
    if (!ok) problems.push(`${what} must be an http:// or https:// URL, got "${raw}"`);
    else url = what === 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' ? raw : tracesUrl(raw);
  }
  const maxQueueSize = int(
    'otlp-queue-size',
    queueFlag,
    otelNumber(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, problems),
    1,
    problems,
  );
  return {
    url,
    maxQueueSize,
    maxExportBatchSize: otelNumber(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, problems),
    scheduledDelayMs: otelNumber(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0, problems),
    exportTimeoutMs: otelNumber(
      env,
      'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
      otelNumber(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000, 1, problems),
      1,
      problems,
    ),
  };
}

/** --metrics-listen's ADDR:PORT; undefined when off or refused (reported). */
export function metricsListen(raw: string | undefined, problems: string[]): ListenAddress | undefined {
  if (raw === undefined) return undefined;
  const a = parseListenAddress(raw);
  if ('why' in a) {
    problems.push(a.why);
    return undefined;
  }
  return a;
}
