// The reconciler reads only the goals in flight: creation adds a goal to the live set and its
// end leaves it (in the move's script), a pause keeps it; finished goals, however many the
// retention keeps, cost the reconciler nothing; a goal an older deepq created (not in the live
// set) is found by the daily rebuild and repaired; stale members leave the set.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reconcile } from '../../services/reflector/reconcile.ts';
import { sweep } from '../../services/reflector/sweep.ts';
import { PLAN_QUEUE, planJobId } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const live = () => redis.client.zrange(t.rt.goals.keys.liveGoals(), '0', '-1');
const hmgetCalls = async () =>
  Number(/cmdstat_hmget:calls=(\d+)/.exec(await redis.client.info('commandstats'))?.[1] ?? 0);

test('a goal is live from its creation to its end; a pause for a human keeps it live', async () => {
  const goalId = await t.newGoal();
  assert.ok((await live()).includes(goalId));
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: 'out of tokens' }, 1));
  assert.ok((await live()).includes(goalId), 'a goal awaiting a human left the live set');
  assert.ok(await t.rt.lifecycle.cancel(goalId, 1));
  assert.ok(!(await live()).includes(goalId), 'an ended goal stayed in the live set');
});

test('finished goals cost the reconciler nothing: it reads the live ones only', async () => {
  await reconcile(t.rt); // the first run rebuilds the live set from the index
  for (let i = 0; i < 40; i++) {
    const goalId = await t.newGoal(`finished ${i}`);
    assert.ok(await t.rt.lifecycle.fail(goalId, 'done with it'));
  }
  const running = await t.newGoal('still queued');
  // Within the grace period (nothing to repair), a goal's read is one HMGET.
  const before = await hmgetCalls();
  const report = await reconcile(t.rt);
  assert.deepEqual(await live(), [running]);
  assert.equal(report.checked, 1);
  assert.equal((await hmgetCalls()) - before, 1, 'the reconciler read goals that are not live');
});

test('a goal an older deepq created (not in the live set) is found by the rebuild and repaired', async () => {
  const goalId = await t.newGoal('created before the live set');
  await redis.client.zrem(t.rt.goals.keys.liveGoals(), goalId);
  await reconcile(t.rt, Date.now() + 3_600_000);
  const plan = await t.rt.queues.get(PLAN_QUEUE).getJob(planJobId(goalId, 1));
  assert.equal(plan, undefined, 'repaired before the daily rebuild was due');
  await redis.client.del(t.rt.goals.keys.liveGoalsRebuilt()); // a day later
  const report = await reconcile(t.rt, Date.now() + 3_600_000);
  assert.ok(report.repaired >= 1);
  assert.ok((await live()).includes(goalId));
  assert.ok(await t.rt.queues.get(PLAN_QUEUE).getJob(planJobId(goalId, 1)), 'its missing plan job was not added');
});

test('members whose goal ended or is gone leave the live set; the sweep removes swept goals from it', async () => {
  const ended = await t.newGoal('ended behind the live set');
  const gone = await t.newGoal('gone');
  await redis.client.hset(t.rt.goals.keys.goal(ended), 'status', 'done'); // as a rebuild racing its end
  await redis.client.zadd(t.rt.goals.keys.liveGoals(), Date.now(), ended);
  await redis.client.del(t.rt.goals.keys.goal(gone));
  await reconcile(t.rt);
  const members = await live();
  assert.ok(!members.includes(ended) && !members.includes(gone), `stale members kept: ${members}`);
  const orphan = await t.newGoal('orphaned');
  await redis.client.del(t.rt.goals.keys.goal(orphan));
  await sweep(t.rt);
  assert.ok(!(await live()).includes(orphan));
});
