// A maintenance schedule's run holds a lease: BullMQ queues a schedule's next run when the
// current one starts, so a run longer than its interval met the next one on another reflector
// (the same goals judged twice, a first run's removals counted again as orphans).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from 'bullmq';
import { maintenanceHandler } from '../../services/reflector/maintenance.ts';
import { withLease } from '../../shared/runtime/lease.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const run = (name: string) => maintenanceHandler(t.rt)({ name, data: {} } as Job);

test('a sweep or reconcile run while another holds its lease does nothing; its own run releases it', async () => {
  const goalId = await t.newGoal('gone soon');
  await redis.client.del(t.rt.goals.keys.goal(goalId));
  for (const schedule of ['sweep', 'reconcile']) {
    const lease = t.rt.goals.keys.maintenanceLease(schedule);
    await redis.client.set(lease, 'another-reflector', 'PX', 60_000);
    assert.deepEqual(await run(schedule), { skipped: 'an earlier run of this schedule is still under way' });
    assert.equal(await redis.client.get(lease), 'another-reflector', "another run's lease is left alone");
    await redis.client.del(lease);
  }
  assert.ok(await redis.client.exists(t.rt.goals.keys.events(goalId)), 'the skipped sweep removed keys');
  const swept = (await run('sweep')) as { orphans: number };
  assert.equal(swept.orphans, 1);
  assert.equal(await redis.client.exists(t.rt.goals.keys.events(goalId)), 0);
  assert.equal(await redis.client.exists(t.rt.goals.keys.maintenanceLease('sweep')), 0, 'released');
  const reconciled = await run('reconcile');
  assert.ok(!('skipped' in (reconciled as object)), JSON.stringify(reconciled));
  assert.equal(await redis.client.exists(t.rt.goals.keys.maintenanceLease('reconcile')), 0, 'released');
});

test('a run longer than its lease keeps it renewed; a dead run holds it for one lease at most', async () => {
  const key = t.rt.goals.keys.maintenanceLease('test');
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const long = withLease(redis.client, key, () => sleep(1200).then(() => 'done'), 300);
  await sleep(700);
  assert.deepEqual(await withLease(redis.client, key, async () => 'ran', 300), {
    skipped: 'an earlier run of this schedule is still under way',
  });
  assert.equal(await long, 'done');
  assert.equal(await redis.client.exists(key), 0);
  // A run that died: its lease (no one renews it) lapses.
  await redis.client.set(key, 'dead-run', 'PX', 300);
  await sleep(400);
  assert.equal(await withLease(redis.client, key, async () => 'ran', 300), 'ran');
});
