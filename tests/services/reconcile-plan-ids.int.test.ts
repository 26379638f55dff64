// The reconciler finds a goal's plan job under either id it can have: a resume adds the plan job
// of the cycle it starts under `<goal>:<step>:plan-r<n>`, a reflection the later cycles' under the
// plain `<goal>:<step>:plan`. A goal resumed once and then waiting on a plain-id plan job (a slow
// planner, a backlog) must not get a second plan job: two planner calls for one cycle.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reconcile } from '../../services/reflector/reconcile.ts';
import { PLAN_QUEUE, planJobId } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const HOUR = 3600_000;
const planJobsOf = async (goalId: string) =>
  (await t.rt.queues.get(PLAN_QUEUE).getJobs(['waiting', 'delayed', 'prioritized', 'active']))
    .filter((j) => j.data.goalId === goalId)
    .map((j) => j.id);

test('a resumed goal waiting on its plain-id plan job gets no second one', async () => {
  const goalId = await t.newGoal('resumed once, its next cycle queued');
  // The one field a resume leaves that matters here: the goal was resumed once before.
  await redis.client.hset(t.rt.goals.keys.goal(goalId), 'resumes', '1');
  await t.rt.queues.addPlan({ goalId, step: 1 });
  const report = await reconcile(t.rt, Date.now() + HOUR);
  assert.equal(report.repaired, 0);
  assert.deepEqual(await planJobsOf(goalId), [planJobId(goalId, 1)]);
});

test('a resumed goal with no plan job at all gets one, under the resume id', async () => {
  const goalId = await t.newGoal('resumed once, its plan job lost');
  await redis.client.hset(t.rt.goals.keys.goal(goalId), 'resumes', '1');
  const report = await reconcile(t.rt, Date.now() + HOUR);
  assert.equal(report.repaired, 1);
  assert.deepEqual(await planJobsOf(goalId), [planJobId(goalId, 1, 1)]);
});
