// The per-directory mutation score of `npm run mutate`: reads Stryker's JSON report
// (mutation-testing-report-schema) and prints killed / survived / no coverage / timeout and the
// score for each directory in scope (Stryker's own table is per file). `--survivors` also lists
// every surviving and uncovered mutant as file:line mutator -> replacement, for docs/mutation.md.
//
//   node --import tsx scripts/mutation-summary.ts [report.json] [--survivors]

import { createHash } from 'node:crypto';
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

interface Position {
  line: number;
  column: number;
}

interface Mutant {
  id: string;
  mutatorName: string;
  replacement?: string;
  status: string;
  /** 1-based line and column, end exclusive (mutation-testing-report-schema). */
  location: { start: Position; end?: Position };
  /** Ids of the tests (here: test files) that reach the mutant, and of those that killed it. */
  coveredBy?: string[];
  killedBy?: string[];
}

export interface Report {
  files: Record<string, { mutants: Mutant[]; source?: string }>;
  /** Test file -> its tests; with the tap runner a test is one file, its id the file's name. */
  testFiles?: Record<string, { tests: Array<{ id: string; name: string }> }>;
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
  /** 1-based column of the mutated range's start (absent in runs before the key carried it). */
  column?: number;
  mutator: string;
  replacement: string;
  status: string;
  /**
   * The source text the mutant replaces (start to end of its range): sha256 of the exact text, and
   * its first 80 characters with whitespace runs as one space. `--carry` compares the hash.
   */
  original?: { sha256: string; text: string };
}

/** The exact text of [start, end) in source (1-based lines and columns). */
export function textAt(source: string, start: Position, end: Position): string {
  const lines = source.split('\n');
  const offset = (p: Position) => lines.slice(0, p.line - 1).reduce((n, l) => n + l.length + 1, 0) + (p.column - 1);
  return source.slice(offset(start), offset(end));
}

export function originalOf(text: string): { sha256: string; text: string } {
  return {
    sha256: createHash('sha256').update(text).digest('hex'),
    text: text.replace(/\s+/g, ' ').slice(0, 80),
  };
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

/** File, line, column order. */
export const bySite = (a: Survivor, b: Survivor): number =>
  a.file.localeCompare(b.file) || a.line - b.line || (a.column ?? 0) - (b.column ?? 0);

/** Surviving and uncovered mutants, by file and line. */
export function survivors(report: Report): Survivor[] {
  const out: Survivor[] = [];
  for (const [file, { mutants, source }] of Object.entries(report.files)) {
    for (const m of mutants) {
      if (m.status !== 'Survived' && m.status !== 'NoCoverage') continue;
      const { start, end } = m.location;
      out.push({
        file,
        line: start.line,
        column: start.column,
        mutator: m.mutatorName,
        replacement: (m.replacement ?? '').replace(/\s+/g, ' ').slice(0, 80),
        status: m.status,
        ...(source !== undefined && end ? { original: originalOf(textAt(source, start, end)) } : {}),
      });
    }
  }
  return out.sort(bySite);
}

/**
 * The test files Stryker reports as covering or killing any mutant of the report (sorted): what
 * the report's scores depend on besides the mutated code.
 */
export function coveringTestFiles(report: Report): string[] {
  const fileOf = new Map<string, string>();
  for (const [name, { tests }] of Object.entries(report.testFiles ?? {}))
    for (const t of tests) fileOf.set(t.id, name === '' ? t.name : name);
  const out = new Set<string>();
  for (const { mutants } of Object.values(report.files))
    for (const m of mutants)
      for (const id of [...(m.coveredBy ?? []), ...(m.killedBy ?? [])]) out.add(fileOf.get(id) ?? id);
  return [...out].map((f) => f.replace(/\\/g, '/').replace(/^(?:.*?\/)?(?=test\/)/, '')).sort();
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
