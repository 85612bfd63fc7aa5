// The shipped monitoring files (deploy/monitoring/) as tests read them: the rule groups, the
// dashboard, and the metric names their PromQL uses; plus the names a /metrics scrape exposes.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { REPO } from './env.js';

export const MONITORING = join(REPO, 'deploy/monitoring');
export const RULES_FILE = join(MONITORING, 'steward-rules.yaml');
export const RULES_TEST_FILE = join(MONITORING, 'tests/steward-rules.test.yaml');

export interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleGroup {
  name: string;
  rules: Rule[];
}

export function ruleGroups(file = RULES_FILE): RuleGroup[] {
  return (parse(readFileSync(file, 'utf8')) as { groups: RuleGroup[] }).groups;
}

export function rules(): Rule[] {
  return ruleGroups().flatMap((g) => g.rules);
}

export function dashboard(): any {
  return JSON.parse(readFileSync(join(MONITORING, 'grafana-dashboard.json'), 'utf8'));
}

/** Every PromQL expression of the dashboard: panel targets and templating queries. */
export function dashboardExprs(d = dashboard()): string[] {
  const out: string[] = [];
  for (const p of d.panels ?? []) for (const t of p.targets ?? []) if (typeof t.expr === 'string') out.push(t.expr);
  for (const v of d.templating?.list ?? []) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    if (v.type === 'query' && typeof q === 'string') out.push(q);
  }
  return out;
}

const NOT_METRICS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/**
 * The metric names a PromQL expression (or Grafana's label_values(metric, label)) reads: every
 * identifier that is not a function call, a keyword, a label inside {…} or by/without (…), a
 * string, a duration or a Grafana variable.
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)/g, ' $1 ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[a-zA-Z_:][\w:]*/g)) {
    const after = stripped.slice((m.index ?? 0) + m[0].length).trimStart();
    if (after.startsWith('(')) continue; // a function
    if (NOT_METRICS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names].sort();
}

/** Sample names in Prometheus text exposition (histograms as _bucket/_sum/_count). */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{| )/.exec(line);
    if (m) names.add(m[1] as string);
  }
  return names;
}

/** Series Prometheus makes itself for every target, not stewardd's to expose. */
export const SYNTHETIC = new Set(['up']);
