// The alerting rules shipped for Prometheus (deploy/prometheus/alerts.yml) through the real
// promtool (Debian package prometheus; .ci/run installs it): the compose config that loads
// them is valid, the rules parse, their unit tests (alerts.test.yml: each alert fires on the
// series that should raise it and stays quiet otherwise) pass, every deepq metric they read
// exists, the Prometheus Operator copy (k8s/extras/prometheusrule.yaml) has the same groups
// (less the compose-only one), and that one watches every compose service that takes jobs.

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
// alerts.yml's group for docker-compose only: not in the PrometheusRule.
const COMPOSE_GROUP = 'deepq-compose';

async function promtool(...args: string[]): Promise<string> {
  const { stdout, stderr } = await run('promtool', args, { cwd: PROM }).catch((err) => {
    throw new Error(`promtool ${args.join(' ')} failed:\n${err.stdout ?? ''}${err.stderr ?? err.message}`);
  });
  return stdout + stderr;
}

test('the compose Prometheus config loads the rules, and they parse', async () => {
  const out = await promtool('check', 'config', 'prometheus.yml');
  assert.match(out, /SUCCESS: 1 rule files found/);
  assert.match(await promtool('check', 'rules', 'alerts.yml'), /SUCCESS: 11 rules found/);
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

test("the Prometheus Operator's PrometheusRule carries the same groups, less the compose-only one", () => {
  const rule = YAML.parse(readFileSync(join(ROOT, 'k8s/extras/prometheusrule.yaml'), 'utf8'));
  assert.equal(rule.kind, 'PrometheusRule');
  const groups = YAML.parse(readFileSync(join(PROM, 'alerts.yml'), 'utf8')).groups as { name: string }[];
  assert.deepEqual(
    rule.spec.groups,
    groups.filter((g) => g.name !== COMPOSE_GROUP),
  );
});

// A compose service whose containers all exited drops out of DNS service discovery: its
// target goes, `up` never reads 0. Each service that takes jobs needs its own absent().
test('the compose-only group watches every compose service that takes jobs, as Prometheus names it', () => {
  const groups = YAML.parse(readFileSync(join(PROM, 'alerts.yml'), 'utf8')).groups as {
    name: string;
    rules: { alert: string; expr: string }[];
  }[];
  const rule = groups.find((g) => g.name === COMPOSE_GROUP)?.rules.find((r) => r.alert === 'DeepqServiceMissing');
  assert.ok(rule, `alerts.yml: DeepqServiceMissing in group ${COMPOSE_GROUP}`);
  const watched = [...rule.expr.matchAll(/absent\(up\{job="deepq", compose_service="([a-z0-9-]+)"\}\)/g)].map(
    (m) => m[1]!,
  );
  const compose = YAML.parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
  const takesJobs = Object.entries(compose.services as Record<string, { command?: string[] }>)
    .filter(([, s]) => ['planner', 'reflector', 'worker'].includes(s.command?.[0] ?? ''))
    .map(([name]) => name);
  assert.deepEqual([...watched].sort(), [...takesJobs].sort(), 'one absent() per compose service that takes jobs');
  const prom = YAML.parse(readFileSync(join(PROM, 'prometheus.yml'), 'utf8'));
  const job = prom.scrape_configs.find((j: { job_name: string }) => j.job_name === 'deepq');
  const names = job.dns_sd_configs.flatMap((d: { names: string[] }) => d.names);
  for (const n of watched) assert.ok(names.includes(n), `prometheus.yml's deepq job does not discover ${n}`);
  assert.ok(
    job.relabel_configs.some(
      (r: { source_labels: string[]; target_label: string }) =>
        r.source_labels.includes('__meta_dns_name') && r.target_label === 'compose_service',
    ),
    'compose_service is the DNS name',
  );
});

function alertNames(): string[] {
  const rules = YAML.parse(readFileSync(join(PROM, 'alerts.yml'), 'utf8'));
  return rules.groups.flatMap((g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert));
}
