// The alerting rules shipped for Prometheus (deploy/prometheus/alerts.yml) through the real
// promtool (Debian package prometheus; .ci/run installs it): the compose config that loads
// them is valid, the rules parse, their unit tests (alerts.test.yml: each alert fires on the
// series that should raise it and stays quiet otherwise) pass, every deepq metric they read
// exists, and the Prometheus Operator copy (k8s/extras/prometheusrule.yaml) has the same groups.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { UiMetrics } from '../../services/ui/metrics.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PROM = join(ROOT, 'deploy/prometheus');
const run = promisify(execFile);

async function promtool(...args: string[]): Promise<string> {
  const { stdout, stderr } = await run('promtool', args, { cwd: PROM }).catch((err) => {
    throw new Error(`promtool ${args.join(' ')} failed:\n${err.stdout ?? ''}${err.stderr ?? err.message}`);
  });
  return stdout + stderr;
}

test('the compose Prometheus config loads the rules, and they parse', async () => {
  const out = await promtool('check', 'config', 'prometheus.yml');
  assert.match(out, /SUCCESS: 1 rule files found/);
  assert.match(await promtool('check', 'rules', 'alerts.yml'), /SUCCESS: 8 rules found/);
});

test("the rules' unit tests pass: each alert fires when it should and only then", async () => {
  assert.match(await promtool('test', 'rules', 'alerts.test.yml'), /SUCCESS/);
  // Every alert has at least one case that expects it to fire.
  const tests = YAML.parse(readFileSync(join(PROM, 'alerts.test.yml'), 'utf8'));
  const fired = new Set<string>();
  for (const t of tests.tests)
    for (const a of t.alert_rule_test) if (a.exp_alerts?.length) fired.add(a.alertname as string);
  assert.deepEqual([...fired].sort(), alertNames().sort());
});

test('every deepq metric the rules read is one deepq serves', async () => {
  const served = new Set<string>();
  for (const registry of [new Metrics().registry, new UiMetrics().registry])
    for (const m of await registry.getMetricsAsJSON()) served.add(m.name);
  const used = new Set(readFileSync(join(PROM, 'alerts.yml'), 'utf8').match(/\bdeepq_[a-z_]+/g));
  assert.ok(used.size >= 7, `rules read ${[...used]}`);
  for (const name of used) assert.ok(served.has(name), `${name} is not a metric deepq serves`);
});

test("the Prometheus Operator's PrometheusRule carries the same groups", () => {
  const rule = YAML.parse(readFileSync(join(ROOT, 'k8s/extras/prometheusrule.yaml'), 'utf8'));
  assert.equal(rule.kind, 'PrometheusRule');
  assert.deepEqual(rule.spec.groups, YAML.parse(readFileSync(join(PROM, 'alerts.yml'), 'utf8')).groups);
});

function alertNames(): string[] {
  const rules = YAML.parse(readFileSync(join(PROM, 'alerts.yml'), 'utf8'));
  return rules.groups.flatMap((g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert));
}
