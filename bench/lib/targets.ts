// The targets the bench reports against: issue 14's as issue 29 (the native shim) tightened them, in
// one place. Each benchmark sets a target of its own; the ones the issues restate are applied here by
// row id, so the table says met/missed against what the latest issue asks and not an older target. The daemon-alone figure, which chain.ts
// reports as an extra of its row, becomes a row of its own with its own target.

import type { Row } from './report.js';

interface Target {
  target: string;
  met: (r: Row) => boolean | null;
}

const ratioAtMost = (max: number) => (r: Row) => (r.ratio === undefined ? null : r.ratio <= max);

/** Issue 14's targets by row id. */
export const ISSUE_14_TARGETS: Record<string, Target> = {
  // The shim-storm row (bench/rows/shim-storm.ts) and the shim call (bench/rows/shim.ts) set these themselves.
  'shim-call': { target: '<= 0.5x curl (issue 29)', met: ratioAtMost(0.5) },
  chain: { target: '<= 1.25x (ADD+DEL through the shipped shim; issue 29)', met: ratioAtMost(1.25) },
  'chain-daemon': { target: '<= 1.10x', met: ratioAtMost(1.1) },
  'add-during-storm': { target: 'p99 <= 2x idle', met: ratioAtMost(2) },
};

/** A figure the chain benchmark reports as extras of its row (same iterations), shown as a row of its own. */
interface ChainFigure {
  id: string;
  title: string;
  label: string;
  msKey: string;
  ratioKey: string;
  target: string;
  note: string;
}

const CHAIN_FIGURES: ChainFigure[] = [
  {
    id: 'chain-daemon',
    title: 'ADD+DEL, bridge + host-local: stewardd over its socket, no shim',
    label: 'the same ADD+DEL sent to stewardd over its socket',
    msKey: 'daemonOnlyMs',
    ratioKey: 'daemonOnlyRatio',
    target: '',
    note: 'from the chain benchmark, same iterations (bench/rows/chain.ts daemonOnly)',
  },
  {
    id: 'chain-curl',
    title: "ADD+DEL, bridge + host-local: each request one curl --unix-socket process (an executed client's floor)",
    label: 'the same ADD+DEL, each request one curl process',
    msKey: 'curlMs',
    ratioKey: 'curlRatio',
    target: 'reported (the shim row against it: shimMinusCurlMs)',
    note: 'from the chain benchmark, same iterations (bench/rows/chain.ts curl mode)',
  },
];

/** The chain row's figure `f` as a row of its own (unless chain.ts already made one). */
function chainFigureRow(rows: Row[], f: ChainFigure): Row | undefined {
  const chain = rows.find((r) => r.id === 'chain');
  if (!chain || rows.some((r) => r.id === f.id)) return undefined;
  const ms = chain.extra?.[f.msKey];
  const ratio = chain.extra?.[f.ratioKey];
  if (typeof ms !== 'number' || typeof ratio !== 'number') return undefined;
  return {
    id: f.id,
    title: f.title,
    unit: chain.unit,
    candidate: { label: f.label, median: ms, n: chain.candidate.n },
    ...(chain.floor ? { floor: chain.floor } : {}),
    ratio,
    target: f.target,
    met: null,
    notes: [f.note],
  };
}

/** Adds the derived rows and sets issue 14's target and met/missed on every row it names. */
export function applyTargets(rows: Row[]): Row[] {
  const out: Row[] = [];
  const derived = CHAIN_FIGURES.map((f) => chainFigureRow(rows, f)).filter((r): r is Row => r !== undefined);
  for (const r of rows) {
    out.push(r);
    if (r.id === 'chain') out.push(...derived);
  }
  return out.map((r) => {
    const t = ISSUE_14_TARGETS[r.id];
    return t ? { ...r, target: t.target, met: t.met(r) } : r;
  });
}
