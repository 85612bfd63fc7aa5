// The small registry each area of the metrics (requests.ts, journal.ts, teardown.ts, audit.ts,
// spool.ts, socket.ts, process.ts) registers into: the one prom-client Registry /metrics serves,
// and the two shapes of gauge the areas share.

import { Gauge, type Registry } from 'prom-client';

/** A gauge whose value is computed at each scrape (so it never drifts from what it mirrors). */
export function scrapedGauge(
  registry: Registry,
  name: string,
  help: string,
  collect: (g: Gauge) => void,
  labelNames: string[] = [],
): Gauge {
  const g: Gauge = new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      collect(g);
    },
  });
  return g;
}

/** Every known state is reported, 0 included, so a series never vanishes when its count drops to 0. */
export function setByState(g: Gauge, known: readonly string[], counts: Record<string, number>): void {
  g.reset();
  for (const state of known) g.set({ state }, counts[state] ?? 0);
  for (const [state, n] of Object.entries(counts)) if (!known.includes(state)) g.set({ state }, n);
}
