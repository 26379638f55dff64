// A service waiting for Redis at start (a failover, a cluster start, Redis loading its AOF)
// answers /healthz, so Kubernetes' startup probe does not kill it (checked for the worker of a
// role with a fleet-wide cap, whose start sets that cap in Redis); and started by `deepq up`, it
// exits when its supervisor leaves meanwhile, instead of waiting for ever.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { freePort } from '../../cli/private-redis.ts';
import { BIN } from '../../cli/supervisor.ts';
import { DEFAULT_ROLES } from '../../shared/agent/roles.ts';
import { type ServiceProc, startProcess, testEnv } from '../../testing/fleet.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { until } from '../../testing/until.ts';

let svc: ServiceProc | undefined;
after(() => svc?.proc.kill('SIGKILL'));

test('a capped role worker answers /healthz while Redis is unreachable', async () => {
  const dir = tempDir('deepq-health-');
  const file = join(dir, 'deepq.json');
  const roles = DEFAULT_ROLES.map((r) => (r.name === 'critic' ? { ...r, fleetConcurrency: 4 } : r));
  writeFileSync(file, JSON.stringify({ roles }));
  // Nothing listens on this port: every Redis command waits.
  const env = testEnv(`redis://127.0.0.1:${await freePort()}`, { DEEPQ_CONFIG: file });
  svc = startProcess('worker', ['worker', '--role', 'critic'], env);
  const deadline = Date.now() + 20_000;
  let status = 0;
  while (Date.now() < deadline && status !== 200) {
    status = await fetch(`http://127.0.0.1:${svc.port}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(status, 200, `no /healthz within 20 s; output: ${svc.output().slice(-500)}`);
  const ready = await fetch(`http://127.0.0.1:${svc.port}/readyz`);
  assert.equal(ready.status, 503, 'not ready without Redis');
  // A scrape says Redis is away, at once, rather than serving old queue depths as current.
  const started = Date.now();
  const metrics = await (await fetch(`http://127.0.0.1:${svc.port}/metrics`)).text();
  assert.match(metrics, /^deepq_redis_up\{service="worker-critic"\} 0$/m);
  assert.ok(Date.now() - started < 3000, `the scrape took ${Date.now() - started} ms`);
});

test('a service started by a supervisor exits when the supervisor leaves while it still waits for Redis', async () => {
  const env = testEnv(`redis://127.0.0.1:${await freePort()}`);
  // The channel `deepq up` gives its children: closing it is the supervisor leaving.
  const child = spawn(process.execPath, [BIN, 'planner'], { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(child.exitCode, null, `it is still starting: ${out.slice(-300)}`);
  child.disconnect();
  const code = await Promise.race([exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 10_000))]);
  if (code === 'running') child.kill('SIGKILL');
  assert.notEqual(code, 'running', 'still running 10 s after its supervisor left');
  assert.match(out, /supervisor gone \(IPC channel closed\) before this service started/);
});

test('a SIGTERM while a service still waits for Redis is a stop (exit 0), not a death by signal', async () => {
  const env = testEnv(`redis://127.0.0.1:${await freePort()}`);
  const proc = startProcess('planner', ['planner'], env);
  // Its ops server answers while it waits for Redis: the start is under way, no worker runs yet.
  for (let t = 0; ; t++) {
    const up = await fetch(`http://127.0.0.1:${proc.port}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    assert.ok(t < 100, `no /healthz within 20 s: ${proc.output().slice(-500)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const exited = new Promise<[number | null, string | null]>((r) => proc.proc.once('exit', (c, s) => r([c, s])));
  proc.proc.kill('SIGTERM');
  const result = await Promise.race([exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 10_000))]);
  if (result === 'running') proc.proc.kill('SIGKILL');
  assert.deepEqual(result, [0, null], proc.output().slice(-500));
});

test('with METRICS_PORT=0 the port it picked is logged before Redis answers', async () => {
  const env = { ...testEnv(`redis://127.0.0.1:${await freePort()}`), METRICS_PORT: '0', LOG_LEVEL: 'info' };
  const child = spawn(process.execPath, [BIN, 'planner'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  try {
    const port = await until(() => Number(/"metricsPort":(\d+)/.exec(out)?.[1]) || false, 20_000, 'the port logged');
    assert.doesNotMatch(out, /planner started/, 'Redis never answered: the service has not started');
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  } finally {
    child.kill('SIGKILL');
  }
});
