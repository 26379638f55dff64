// The chaos verifier against goals a real fleet ran: a clean goal passes; a done goal whose
// cycle-1 `reflected` event is gone is reported.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { verifyGoals, waitForGoals } from '../../testing/chaos.ts';
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
