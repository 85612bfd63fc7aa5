// The Markdown the bench prints and the docs quote: one function from a run's results to the
// table, its details and the run's description, so the terminal and the three docs agree.

import { LOAD_LIMIT, type BenchResults, type Row } from './report.js';

const fmt = (x: number | undefined, unit: string) => (x === undefined || Number.isNaN(x) ? '' : `${x} ${unit}`);

export function table(rows: Row[]): string {
  const lines = ['| benchmark | steward | floor | ratio | target | met |', '|---|--:|--:|--:|---|---|'];
  for (const r of rows) {
    const c =
      (r.candidate.p99 !== undefined
        ? `p50 ${fmt(r.candidate.median, r.unit)}, p99 ${fmt(r.candidate.p99, r.unit)}`
        : fmt(r.candidate.median, r.unit)) + (r.tableNote ? `; ${r.tableNote}` : '');
    const f =
      r.floor === undefined
        ? '—'
        : r.floor.p99 !== undefined
          ? `p50 ${fmt(r.floor.median, r.unit)}, p99 ${fmt(r.floor.p99, r.unit)}`
          : fmt(r.floor.median, r.unit);
    const ratio = r.ratio === undefined ? '—' : `${r.ratio}×${r.ratioOf ? ` (${r.ratioOf})` : ''}`;
    const met = r.met === null ? 'reported' : r.met ? 'met' : '**missed**';
    lines.push(`| ${r.title} | ${c} | ${f} | ${ratio} | ${r.target || '—'} | ${met} |`);
  }
  return lines.join('\n');
}

export function details(rows: Row[]): string {
  const out: string[] = [];
  for (const r of rows) {
    const parts = Object.entries(r.extra ?? {}).map(([k, v]) => `${k}=${v}`);
    out.push(
      `- ${r.id}: steward = ${r.candidate.label} (n=${r.candidate.n})` +
        (r.floor ? `; floor = ${r.floor.label} (n=${r.floor.n})` : '') +
        (parts.length ? `; ${parts.join(', ')}` : ''),
    );
    for (const note of r.notes ?? []) out.push(`  - ${note}`);
  }
  return out.join('\n');
}

/** One line: when, what, where, under which load, and whether the load qualifies the run. */
export function describe(res: BenchResults): string {
  const l = res.load;
  const scope = res.only ? `\`npm run bench -- --json --only ${res.only.join(',')}\`` : '`npm run bench -- --json`';
  return (
    `${scope} on ${res.date.slice(0, 16).replace('T', ' ')} UTC, commit ${res.commit}` +
    `${res.dirty ? ' (with uncommitted changes)' : ''}, scale ${res.scale}, ${res.seconds} s; ` +
    `${res.machine.cores} cores (${res.machine.cpuModel}), ${res.machine.memMiB} MiB, Linux ${res.machine.kernel}; ` +
    `node ${res.node}, ${res.go !== undefined ? `go ${res.go}` : `bun ${res.bun ?? '?'} (a run of the former Bun shim)`}; shim ${res.shim}. ` +
    `Load average (1 min): ${l.before} before, ${l.during.mean} mean / ${l.during.max} max during ` +
    `(${l.during.samples} samples, the run's own processes included), ${l.after} after; ` +
    `other processes' CPU during the run: ${l.otherCores ?? '?'} cores: ` +
    (res.quiet
      ? `the machine was quiet (load before and other CPU below ${LOAD_LIMIT}), so the run qualifies for issue 14's done condition.`
      : `**not** quiet (load before or other CPU not below ${LOAD_LIMIT}), so the run does not qualify for issue 14's done condition.`)
  );
}

export function failuresText(res: BenchResults): string {
  return res.failures.length === 0
    ? ''
    : `\n\nFailed benchmarks (no row):\n\n${res.failures.map((f) => `- ${f.split('\n')[0]}`).join('\n')}`;
}

/** The whole report: description, table, details. */
export function report(res: BenchResults): string {
  return `${describe(res)}\n\n${table(res.rows)}\n\n${details(res.rows)}${failuresText(res)}`;
}
