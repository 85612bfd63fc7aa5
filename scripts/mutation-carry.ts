// `npm run mutate:report -- --carry [--carry-from <old latest.json>]`: after a re-run, carry an old
// verdict (docs/mutation/classes.json) to a new survivor that has none, when the two are the same
// mutant of the same code: the same file (or the file git sees it renamed to since the old run, or
// any file when the old survivor is gone: the code moved),
// the same mutator and replacement, and the same original source text at the mutated range
// (sha256); a verdict whose key is unchanged is kept only over the same original text. Everything carried, every verdict dropped (its survivor is gone) and every survivor
// left without a verdict is printed for a human to review: nothing is carried silently, and
// test/unit/mutation-docs.test.ts still fails on any survivor without a verdict.

import { survivorKey, type Classification, type MutationResults } from './mutation-docs.js';
import type { Survivor } from './mutation-summary.js';

export interface CarryResult {
  classes: Classification[];
  carried: Array<{ from: string; to: string; class: string }>;
  dropped: string[];
  unclassified: string[];
  /** New survivors whose matching old verdicts disagree: left for a human. */
  conflicts: Array<{ to: string; from: string[] }>;
}

/**
 * The verdicts for `next`'s survivors: those whose key is unchanged, plus the carried ones.
 * `renamed` maps an old file name to its new one (git diff --find-renames between the two runs).
 */
export function carry(
  old: Pick<MutationResults, 'survivors'>,
  oldClasses: readonly Classification[],
  next: Pick<MutationResults, 'survivors'>,
  renamed: ReadonlyMap<string, string> = new Map(),
): CarryResult {
  const byKey = new Map(oldClasses.map((c) => [c.key, c]));
  const nextKeys = new Set(next.survivors.map(survivorKey));
  const out = new Map<string, Classification>();
  const carried: CarryResult['carried'] = [];
  const unclassified: string[] = [];
  const conflicts: CarryResult['conflicts'] = [];
  // Another file counts when git saw the file renamed, or when the old survivor is gone from the new
  // run (the code moved): the original text must still be the same.
  const sameFile = (a: Survivor, b: Survivor) =>
    (renamed.get(a.file) ?? a.file) === b.file || !nextKeys.has(survivorKey(a));
  const same = (a: Survivor, b: Survivor) =>
    sameFile(a, b) &&
    a.mutator === b.mutator &&
    a.replacement === b.replacement &&
    a.original !== undefined &&
    a.original.sha256 === b.original?.sha256;
  const oldByKey = new Map(old.survivors.map((o) => [survivorKey(o), o]));
  for (const s of next.survivors) {
    const key = survivorKey(s);
    const kept = byKey.get(key);
    // The same key is the same verdict only over the same code: other code now at that line and
    // column (a split moved it there) is read again, like any other survivor.
    const before = oldByKey.get(key);
    if (kept && (before === undefined || before.original?.sha256 === s.original?.sha256)) {
      out.set(key, kept);
      continue;
    }
    const matches = old.survivors
      .filter((o) => same(o, s))
      .map((o) => byKey.get(survivorKey(o)))
      .filter((c): c is Classification => c !== undefined);
    const verdicts = new Set(matches.map((c) => `${c.class}\n${c.why}`));
    if (matches.length === 0) unclassified.push(key);
    else if (verdicts.size > 1) conflicts.push({ to: key, from: matches.map((c) => c.key) });
    else {
      const from = matches[0] as Classification;
      out.set(key, { key, class: from.class, why: from.why });
      carried.push({ from: from.key, to: key, class: from.class });
    }
  }
  const dropped = oldClasses.filter((c) => !nextKeys.has(c.key)).map((c) => c.key);
  return {
    classes: [...out.values()].sort((a, b) => a.key.localeCompare(b.key, 'en', { numeric: true })),
    carried,
    dropped,
    unclassified,
    conflicts,
  };
}

export function describeCarry(r: CarryResult): string {
  return [
    `carried ${r.carried.length} verdict(s) — review each (same file, mutator, replacement and original text):`,
    ...r.carried.map((c) => `  ${c.from}\n    -> ${c.to}   [${c.class}]`),
    `dropped ${r.dropped.length} verdict(s) whose survivor is gone:`,
    ...r.dropped.map((k) => `  ${k}`),
    `${r.conflicts.length} survivor(s) whose matching old verdicts disagree (read them):`,
    ...r.conflicts.map((c) => `  ${c.to} <- ${c.from.join(' | ')}`),
    `${r.unclassified.length} survivor(s) with no verdict (read and classify them in docs/mutation/classes.json):`,
    ...r.unclassified.map((k) => `  ${k}`),
  ].join('\n');
}
