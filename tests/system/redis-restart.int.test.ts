// Redis (with AOF) is restarted while goals run. Every service notices (/readyz answers 503
// with checks.redis false while it is away), reconnects by itself, answers 200 again, and
// every goal completes with its artifacts: nothing acknowledged before the restart is lost.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyGoals, waitForGoals } from '../../testing/chaos.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis({ appendonly: true });
let fleet: Fleet;

before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '400' });
});
after(async () => fleet?.stop());

interface Probe {
  status: number | 'error';
  body?: { ok?: boolean; checks?: Record<string, boolean> };
}

async function readyz(port: number): Promise<Probe> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(3000) });
    return { status: res.status, body: (await res.json()) as Probe['body'] };
  } catch {
    return { status: 'error' };
  }
}

async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('Redis restarted mid-run: /readyz is 503 while it is away, services reconnect, every goal completes', {
  timeout: 180_000,
}, async () => {
  for (const [name, port] of fleet.ports)
    assert.equal((await readyz(port)).status, 200, `${name} not ready before the restart`);

  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push(await fleet.client.enqueue({ goal: `Survive a Redis restart ${i}` }));
  // Restart once work is in flight: some subtasks started, none of the goals finished.
  await until('subtasks to start', async () => {
    const events = await fleet.client.goals.events(ids[0]!);
    return events.some((e) => e.event.type === 'subtask_started');
  });

  // While Redis is down (4 s), every service reports not ready, naming Redis.
  const seenDown = new Map<string, Probe>();
  let restarted = false;
  const restarting = redis.server.restart(4000).finally(() => (restarted = true));
  while (!restarted && seenDown.size < fleet.ports.size) {
    await Promise.all(
      [...fleet.ports].map(async ([name, port]) => {
        if (seenDown.has(name)) return;
        const p = await readyz(port);
        if (p.status === 503) seenDown.set(name, p);
      }),
    );
    await new Promise((r) => setTimeout(r, 50));
  }
  await restarting;
  assert.deepEqual(
    [...seenDown.keys()].sort(),
    [...fleet.ports.keys()].sort(),
    'some service never reported Redis down',
  );
  for (const [name, p] of seenDown) {
    assert.equal(p.body?.ok, false, name);
    assert.equal(p.body?.checks?.redis, false, `${name}: ${JSON.stringify(p.body)}`);
  }

  // Back up: every service reconnects by itself and says so.
  await until('every service to be ready again', async () => {
    const probes = await Promise.all([...fleet.ports.values()].map(readyz));
    return probes.every((p) => p.status === 200 && p.body?.checks?.redis === true && p.body?.checks?.worker === true);
  });

  // Goals enqueued after the restart run too, and all earlier ones complete.
  ids.push(await fleet.client.enqueue({ goal: 'Enqueued after the restart' }));
  const status = await waitForGoals(fleet, ids, 90_000);
  assert.deepEqual(
    [...status.values()].filter((s) => s !== 'done'),
    [],
    JSON.stringify(Object.fromEntries(status)),
  );
  const v = await verifyGoals(fleet, ids);
  console.log(`redis restart: ${v.done}/${ids.length} done, re-executions ${JSON.stringify(v.reExecutions)}`);
  assert.deepEqual(v.problems, []);
  assert.equal(v.lost, 0);
  assert.equal(v.duplicates, 0);
  // No service died or restarted along the way.
  for (const p of fleet.procs) assert.equal(p.proc.exitCode, null, `${p.name} exited:\n${p.output().slice(-2000)}`);
});
