// One benchmark's figures, as printed in the table and written to JSON.

import { median, p99, round } from './stats.js';

export interface Figure {
  label: string;
  /** Median, in `unit`. */
  median: number;
  p99?: number;
  n: number;
}

/** A latency figure: the median and p99 of `xs` (ms, two decimals) and how many. */
export function spread(label: string, xs: readonly number[]): Figure {
  return { label, median: round(median(xs)), p99: round(p99(xs)), n: xs.length };
}

export interface Row {
  id: string;
  title: string;
  unit: string;
  candidate: Figure;
  floor?: Figure;
  /** candidate / floor: the median of per-pair ratios, or as `ratioOf` says. */
  ratio?: number;
  ratioOf?: string;
  target: string;
  /** true/false when the row has a target; null when it only reports. */
  met: boolean | null;
  /** A short figure the table shows after the steward cell's (e.g. how many STATUS answered 50). */
  tableNote?: string;
  /** Further named figures (CPU per op, RSS, bytes...). */
  extra?: Record<string, number | string>;
  notes?: string[];
}

export interface BenchContext {
  /** Scale the number of samples (1 = the documented run). */
  scale: number;
  log: (msg: string) => void;
}

export const n = (base: number, ctx: BenchContext, min = 3): number => Math.max(min, Math.round(base * ctx.scale));

/** The 1-minute load average under which a run counts for issue 14's done condition. */
export const LOAD_LIMIT = 1.5;

/** What `npm run bench -- --json` writes (bench-results/latest.json) and bench/docs.ts reads. */
export interface BenchResults {
  schema: 2;
  /** ISO date the run ended. */
  date: string;
  commit: string;
  /** Uncommitted changes (tracked or untracked, not ignored) in the tree that was benchmarked. */
  dirty: boolean;
  node: string;
  /** The Go toolchain that built the shim (`go version`'s version). */
  go?: string;
  /** Runs from before the Go shim: the Bun that compiled the shim then. */
  bun?: string;
  machine: { cpuModel: string; cores: number; kernel: string; memMiB: number };
  /**
   * 1-minute load average: before the first benchmark, sampled every 5 s during (the run's own
   * processes included), after the last; otherCores: the CPU every other process on the machine used
   * during the run, in cores (bench/lib/other-cpu.ts).
   */
  load: { before: number; during: { mean: number; max: number; samples: number }; after: number; otherCores?: number };
  /** Load before the run and the other processes' CPU during it both below LOAD_LIMIT. */
  quiet: boolean;
  shim: string;
  scale: number;
  only: string[] | null;
  seconds: number;
  rows: Row[];
  failures: string[];
}
