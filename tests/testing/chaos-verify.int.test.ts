// The chaos verifier against goals a real fleet ran: a clean goal passes; a done goal whose
// cycle-1 `reflected` event is gone is reported. And the wait for late re-deliveries: it lasts
// until no job of the goals is live, and names the jobs still live at its bound.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { verifyGoals, waitForGoals, waitForJobsToSettle } from '../../testing/chaos.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let fleet: Fleet;
let goals: string[];

before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { LOG_LEVEL: 'warn' });
  goals = [
    await fleet.client.enqueue({ goal: 'Verifier goal A: sort numbers' }),
    await fleet.client.enqueue({ goal: 'Verifier goal B: sort numbers' }),
  ];
  const status = await waitForGoals(fleet, goals, 60_000);
  assert.deepEqual([...status.values()], ['done', 'done']);
});
after(() => fleet?.stop());

test('a goal the fleet ran passes the verifier', async () => {
  const v = await verifyGoals(fleet, [goals[0]!]);
  assert.deepEqual(v.problems, []);
  assert.equal(v.done, 1);
  assert.equal(v.lost, 0);
  assert.equal(v.duplicates, 0);
});

test('a done goal whose cycle-1 reflected event is missing is reported', async () => {
  const goalId = goals[1]!;
  const key = fleet.client.goals.keys.events(goalId);
  const rows = await fleet.client.redis.xrange(key, '-', '+');
  const row = rows.find(([, f]) => {
    const e = JSON.parse(f[1]!);
    return e.type === 'reflected' && e.step === 1;
  });
  assert.ok(row, 'the goal has no cycle-1 reflected event to remove');
  await fleet.client.redis.xdel(key, row[0]);
  const v = await verifyGoals(fleet, [goalId]);
  assert.deepEqual(v.problems, [`goal ${goalId}: cycle 1 was dispatched but never reflected on`]);
});

test('waiting for late jobs lasts until none of the goals is live, and names those live at the bound', async () => {
  const goalId = goals[0]!;
  const plan = fleet.client.queues.get(PLAN_QUEUE);
  // A plan job of the done goal delivered late (the planner drops it: the goal ended).
  await plan.add('plan', { goalId, step: 1 }, { jobId: `${goalId}:1:late`, delay: 1500 });
  const t0 = Date.now();
  assert.deepEqual(await waitForJobsToSettle(fleet, [goalId], 20_000), []);
  assert.ok(Date.now() - t0 >= 1400, `returned after ${Date.now() - t0} ms, before the late job ran`);
  assert.equal(await (await plan.getJob(`${goalId}:1:late`))?.getState(), 'completed');

  await plan.add('plan', { goalId, step: 1 }, { jobId: `${goalId}:1:later`, delay: 60_000 });
  const other = goals[1]!;
  assert.deepEqual(await waitForJobsToSettle(fleet, [other], 500), [], "another goal's job was counted");
  assert.deepEqual(await waitForJobsToSettle(fleet, [goalId], 500), [`${PLAN_QUEUE}/${goalId}:1:later (delayed)`]);
  await (await plan.getJob(`${goalId}:1:later`))?.remove();
});
