// deploy/monitoring/ checked by Debian's promtool (check rules, and the unit tests that show every
// alert firing and staying silent), and kept consistent: the PrometheusRule carries exactly the
// plain rule file's groups, the PodMonitor scrapes the port the DaemonSet opens, every alert has a
// runbook, the dashboard's queries parse into metric names. (Those names are checked against a live
// scrape in test/integration/monitoring.test.ts.)

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { REPO } from '../helpers/env.js';
import {
  MONITORING,
  RULES_FILE,
  RULES_TEST_FILE,
  dashboard,
  dashboardExprs,
  metricNames,
  ruleGroups,
  rules,
} from '../helpers/monitoring.js';

function promtool(args: string[]): { code: number | null; out: string } {
  const r = spawnSync('promtool', args, { encoding: 'utf8', cwd: MONITORING });
  if (r.error)
    throw new Error(
      `promtool not runnable (${r.error.message}): scripts/setup.sh installs Debian's prometheus package`,
    );
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('alert rules, by promtool', () => {
  test('promtool check rules accepts the rule file and the PrometheusRule groups', () => {
    const r = promtool(['check', 'rules', RULES_FILE]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`SUCCESS: ${rules().length} rules found`));
  });

  test('promtool test rules: every alert fires when it should and stays silent when it should not', () => {
    const r = promtool(['test', 'rules', RULES_TEST_FILE]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /SUCCESS/);
  });

  test('the unit tests cover every alert both ways', () => {
    const spec = parse(readFileSync(RULES_TEST_FILE, 'utf8')) as {
      tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
    };
    const cases = spec.tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of rules()) {
      const mine = cases.filter((c) => c.alertname === alert);
      assert.ok(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${alert}: no case where it fires`,
      );
      assert.ok(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${alert}: no case where it stays silent`,
      );
    }
  });

  test('promtool test rules fails when a rule is broken (the tests can fail)', () => {
    // Same tests against a copy whose stuck-teardown threshold is an hour instead of 15 minutes.
    const dir = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    try {
      execFileSync('mkdir', ['-p', join(dir, 'tests')]);
      const broken = readFileSync(RULES_FILE, 'utf8').replace(
        'steward_oldest_pending_teardown_seconds > 900',
        'steward_oldest_pending_teardown_seconds > 3600',
      );
      assert.notEqual(broken, readFileSync(RULES_FILE, 'utf8'));
      execFileSync('sh', ['-c', `cat > ${dir}/steward-rules.yaml && cp ${RULES_TEST_FILE} ${dir}/tests/`], {
        input: broken,
      });
      const r = promtool(['test', 'rules', join(dir, 'tests/steward-rules.test.yaml')]);
      assert.notEqual(r.code, 0, r.out);
      assert.match(r.out, /StewardTeardownStuck/);
    } finally {
      execFileSync('rm', ['-rf', dir]);
    }
  });

  test('every alert has a severity, a summary and a runbook that says what to run on the node', () => {
    for (const r of rules()) {
      assert.match(r.labels?.severity ?? '', /^(warning|critical)$/, r.alert);
      assert.ok(r.annotations?.summary, `${r.alert} summary`);
      assert.match(r.annotations?.runbook ?? '', /On the node: .*`(stewardd [a-z]+|df|ls)[^`]*`/, `${r.alert} runbook`);
    }
    assert.deepEqual(
      rules()
        .map((r) => r.alert)
        .sort(),
      [
        'StewardAddErrorRate',
        'StewardAuditFailing',
        'StewardDatabaseWriteErrors',
        'StewardNotReady',
        'StewardOrphansHeld',
        'StewardSpoolBacklog',
        'StewardTeardownAbandoned',
        'StewardTeardownStuck',
        'StewardVersionSkew',
      ],
    );
  });
});

describe('operator manifests', () => {
  test('the PrometheusRule carries exactly the plain rule file groups', () => {
    const cr = parse(readFileSync(join(MONITORING, 'prometheusrule.yaml'), 'utf8'));
    assert.equal(cr.kind, 'PrometheusRule');
    assert.equal(cr.apiVersion, 'monitoring.coreos.com/v1');
    assert.deepEqual(cr.spec.groups, ruleGroups());
  });

  test('the PodMonitor selects the DaemonSet pods and scrapes the metrics port the DaemonSet opens with --metrics-listen', () => {
    const pm = parse(readFileSync(join(MONITORING, 'podmonitor.yaml'), 'utf8'));
    assert.equal(pm.kind, 'PodMonitor');
    const ds = parseAllDocuments(readFileSync(join(REPO, 'deploy/daemonset.yaml'), 'utf8'))
      .map((d) => d.toJS())
      .find((d) => d?.kind === 'DaemonSet');
    assert.deepEqual(pm.spec.selector.matchLabels, {
      'app.kubernetes.io/name': ds.spec.template.metadata.labels['app.kubernetes.io/name'],
    });
    assert.deepEqual(pm.spec.namespaceSelector.matchNames, [ds.metadata.namespace]);
    const daemon = ds.spec.template.spec.containers.find((c: any) => c.name === 'stewardd');
    const endpoint = pm.spec.podMetricsEndpoints[0];
    const port = daemon.ports.find((p: any) => p.name === endpoint.port);
    assert.ok(port, `the DaemonSet names no port "${endpoint.port}"`);
    assert.equal(endpoint.path, '/metrics');
    const i = daemon.args.indexOf('--metrics-listen');
    assert.ok(i > 0, 'the DaemonSet turns the listener on');
    assert.equal(daemon.args[i + 1], `$(HOST_IP):${port.containerPort}`);
    assert.ok(
      daemon.env.some((e: any) => e.name === 'HOST_IP' && e.valueFrom?.fieldRef?.fieldPath === 'status.hostIP'),
    );
  });

  test('the dashboard is Grafana JSON whose every panel queries steward_ metrics through the datasource variable', () => {
    const d = dashboard();
    assert.equal(d.uid, 'cni-steward');
    const ids = d.panels.map((p: any) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of d.panels.filter((x: any) => x.type !== 'row')) {
      assert.ok(p.targets.length > 0, p.title);
      for (const t of p.targets) {
        assert.equal(t.datasource.uid, '${datasource}', p.title);
        const names = metricNames(t.expr);
        assert.ok(names.length > 0 && names.every((n) => n.startsWith('steward_')), `${p.title}: ${names.join(', ')}`);
      }
    }
    assert.ok(dashboardExprs().length > 15);
  });

  test('metricNames finds metric names, and not functions, labels, keywords or variables', () => {
    assert.deepEqual(
      metricNames(
        'histogram_quantile(0.99, sum by (le, command) (rate(a_seconds_bucket{command="ADD",x=~"$instance"}[$__rate_interval])))',
      ),
      ['a_seconds_bucket'],
    );
    assert.deepEqual(metricNames('b == 0 or up{job=~".*s.*"} == 0'), ['b', 'up']);
    assert.deepEqual(metricNames('count(c == 0) or vector(0)'), ['c']);
    assert.deepEqual(metricNames('label_values(d_info, instance)'), ['d_info']);
    assert.deepEqual(metricNames('sum without (pod) (e) / ignoring (code) f > 0.1'), ['e', 'f']);
  });
});
