// Every query of the Grafana dashboard (deploy/grafana/dashboards/deepq.json) is valid PromQL:
// each is sent to a real Prometheus (Debian package prometheus; .ci/run installs it), its
// Grafana variables filled in as Grafana would, and must be accepted. The dashboard test in
// deployment-manifests checks the metric names; this one checks the syntax and the operators.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { nextFreePort } from '../../testing/ports.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const DASHBOARD = new URL('../../deploy/grafana/dashboards/deepq.json', import.meta.url);
const VARIABLES: Record<string, string> = {
  $__rate_interval: '1m',
  $__interval: '15s',
  $__range: '10m',
  $queue: '.*',
  $role: '.*',
};

let prometheus: ChildProcess;
let url: string;

/** Each panel's title with its queries, nested rows included. */
function queries(): { title: string; expr: string }[] {
  const out: { title: string; expr: string }[] = [];
  const visit = (panels: { title?: string; panels?: unknown[]; targets?: { expr?: string }[] }[]) => {
    for (const p of panels) {
      if (p.panels) visit(p.panels as typeof panels);
      for (const t of p.targets ?? []) if (t.expr) out.push({ title: p.title ?? '?', expr: t.expr });
    }
  };
  visit(JSON.parse(readFileSync(DASHBOARD, 'utf8')).panels);
  return out;
}

before(async () => {
  const dir = tempDir('deepq-prometheus-');
  writeFileSync(join(dir, 'prometheus.yml'), 'global:\n  scrape_interval: 15s\n');
  const port = nextFreePort();
  url = `http://127.0.0.1:${port}`;
  const args = [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`];
  prometheus = spawn('prometheus', [...args, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    assert.ok(Date.now() < deadline && prometheus.exitCode === null, 'Prometheus did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
});
after(() => {
  prometheus?.kill('SIGKILL');
});

test("every dashboard query is PromQL a real Prometheus accepts, Grafana's variables filled in", async () => {
  const all = queries();
  assert.ok(all.length >= 15, 'a real dashboard');
  for (const { title, expr } of all) {
    let filled = expr;
    for (const [name, value] of Object.entries(VARIABLES)) filled = filled.replaceAll(name, value);
    assert.doesNotMatch(filled, /\$/, `${title}: a variable this test does not know: ${expr}`);
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(filled)}`);
    const body = (await res.json()) as { status: string; error?: string };
    assert.equal(body.status, 'success', `${title}: ${body.error} in ${expr}`);
  }
});

test('a broken query is refused (the check above can fail)', async () => {
  const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent('sum by (model) (rate(x[1m])')}`);
  assert.equal(((await res.json()) as { status: string }).status, 'error');
});
