// The per-directory mutation score of `npm run mutate`: reads Stryker's JSON report
// (mutation-testing-report-schema) and prints killed / survived / no coverage / timeout and the
// score for each directory in scope (Stryker's own table is per file). `--survivors` also lists
// every surviving and uncovered mutant as file:line mutator -> replacement, for docs/mutation.md.
//
//   node --import tsx scripts/mutation-summary.ts [report.json] [--survivors]

import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** The directories whose score issue 13 asks for; a file belongs to the first that prefixes it. */
export const SCOPES = [
  'daemon/src/engine/',
  'daemon/src/store/',
  'shared/src/cni/',
  'daemon/src/audit/',
  'daemon/src/routes/admission.ts',
] as const;

export const DEFAULT_REPORT = 'reports/mutation/mutation.json';

interface Mutant {
  id: string;
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number } };
}

export interface Report {
  files: Record<string, { mutants: Mutant[] }>;
}

export interface Tally {
  scope: string;
  killed: number;
  survived: number;
  noCoverage: number;
  timeout: number;
  /** Compile and runtime errors: invalid mutants, left out of the score as Stryker does. */
  errors: number;
  /** Detected (killed + timeout) over valid (detected + survived + no coverage), in percent; null with none valid. */
  score: number | null;
}

export interface Survivor {
  file: string;
  line: number;
  mutator: string;
  replacement: string;
  status: string;
}

function scopeOf(file: string): string {
  const f = file.replace(/\\/g, '/');
  return SCOPES.find((s) => f.startsWith(s) || f.includes(`/${s}`)) ?? 'other';
}

/** Per-directory totals, in SCOPES order (plus "other" if the report has files outside them). */
export function summarize(report: Report): Tally[] {
  const tallies = new Map<string, Tally>();
  const get = (scope: string): Tally => {
    let t = tallies.get(scope);
    if (!t) {
      t = { scope, killed: 0, survived: 0, noCoverage: 0, timeout: 0, errors: 0, score: null };
      tallies.set(scope, t);
    }
    return t;
  };
  for (const s of SCOPES) get(s);
  for (const [file, { mutants }] of Object.entries(report.files)) {
    const t = get(scopeOf(file));
    for (const m of mutants) {
      if (m.status === 'Killed') t.killed++;
      else if (m.status === 'Survived') t.survived++;
      else if (m.status === 'NoCoverage') t.noCoverage++;
      else if (m.status === 'Timeout') t.timeout++;
      else if (m.status === 'CompileError' || m.status === 'RuntimeError') t.errors++;
    }
  }
  for (const t of tallies.values()) {
    const detected = t.killed + t.timeout;
    const valid = detected + t.survived + t.noCoverage;
    t.score = valid === 0 ? null : (100 * detected) / valid;
  }
  return [...tallies.values()];
}

/** Surviving and uncovered mutants, by file and line. */
export function survivors(report: Report): Survivor[] {
  const out: Survivor[] = [];
  for (const [file, { mutants }] of Object.entries(report.files)) {
    for (const m of mutants) {
      if (m.status !== 'Survived' && m.status !== 'NoCoverage') continue;
      out.push({
        file,
        line: m.location.start.line,
        mutator: m.mutatorName,
        replacement: (m.replacement ?? '').replace(/\s+/g, ' ').slice(0, 80),
        status: m.status,
      });
    }
  }
  return out.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
}

export function formatTable(tallies: Tally[]): string {
  const head = ['directory', 'killed', 'survived', 'no cov', 'timeout', 'errors', 'score'];
  const rows = tallies.map((t) => [
    t.scope,
    String(t.killed),
    String(t.survived),
    String(t.noCoverage),
    String(t.timeout),
    String(t.errors),
    t.score === null ? 'n/a' : `${t.score.toFixed(2)}%`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

function main(argv: string[]): void {
  const path = argv.find((a) => !a.startsWith('--')) ?? DEFAULT_REPORT;
  const report = JSON.parse(readFileSync(path, 'utf8')) as Report;
  console.log(`Mutation score per directory (${path}):`);
  console.log(formatTable(summarize(report)));
  if (argv.includes('--survivors')) {
    for (const s of survivors(report)) {
      console.log(`${s.file}:${s.line}  ${s.status}  ${s.mutator}  -> ${s.replacement}`);
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main(process.argv.slice(2));
