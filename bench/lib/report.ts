// One benchmark's figures, as printed in the table and written to JSON.

export interface Figure {
  label: string;
  /** Median, in `unit`. */
  median: number;
  p99?: number;
  n: number;
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
