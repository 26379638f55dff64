// A cancel removes every job parked on the goal at a budget, by the goal's own list of them: a
// resumed goal's later cycles are planned under the plain plan-job id (the reflector queues them),
// which the cancel did not look for, so such a parked plan job stayed delayed for 30 days. And it
// removes the goal's time-budget deadline, which stayed delayed up to the whole budget.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalClient } from '../../cli/goal-client.ts';
import { processPlanJob } from '../../services/planner/plan-job.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { deadlineJobId, MAINTENANCE_QUEUE, PLAN_QUEUE, planJobId } from '../../shared/runtime/queues.ts';
import { startService } from '../../shared/runtime/service.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { useVfsClient, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
let client: GoalClient;
useVfsClient(redis, (x, c) => {
  t = x;
  client = c;
});

const plan = {
  subtasks: [{ role: 'research-specialist', instruction: 'x', expected_artifact: 'a.md', read_files: [] }],
};
const reflection = { decision: 'continue' as const, reason: 'more to do' };

test("cancel removes a resumed goal's plan job parked at its step budget", async () => {
  const { rt } = t;
  const goalId = newGoalId();
  await rt.goals.create(goalId, 'a goal', { maxSteps: 2, onBudget: 'pause' }, false);
  // Cycle 1 escalates; a human resumes; cycle 2 runs (the resume's plan job done by hand).
  await rt.lifecycle.planJobStart(goalId, 1);
  await rt.lifecycle.dispatch(goalId, 1, plan);
  await rt.lifecycle.reflectJobStart(goalId, 1);
  await rt.lifecycle.awaitHuman(goalId, { step: 1, reflection, outcomes: [] }, 'escalation');
  await client.resume(goalId);
  await (await rt.queues.get(PLAN_QUEUE).getJob(planJobId(goalId, 2, 1)))?.remove();
  await rt.lifecycle.planJobStart(goalId, 2);
  await rt.lifecycle.dispatch(goalId, 2, plan);
  await rt.lifecycle.reflectJobStart(goalId, 2);
  await rt.lifecycle.requeue(goalId, { step: 2, reflection, outcomes: [] });
  // Cycle 3, queued as the reflector does, is past --max-steps 2: its plan job parks.
  await rt.queues.addPlan({ goalId, step: 3 });
  const planner = await startService({
    rt,
    name: 'planner',
    queueName: PLAN_QUEUE,
    role: 'planner',
    concurrency: 1,
    handler: (job, signal, token) => processPlanJob(rt, job, signal, token),
  });
  try {
    const queue = rt.queues.get(PLAN_QUEUE);
    const id = planJobId(goalId, 3);
    await until(async () => (await queue.getJobState(id)) === 'delayed', 15_000);
    const g = await client.get(goalId);
    assert.deepEqual([g.status, g.pausedFor, g.resumes], ['awaiting_human', 'budget', 1]);

    assert.deepEqual(await client.cancel(goalId), { cancelled: true, status: 'cancelled' });
    assert.equal(await queue.getJob(id), undefined, 'the parked plan job is gone');
  } finally {
    await planner.stop();
  }
});

test("cancel removes the goal's time-budget deadline", async () => {
  const goalId = await client.enqueue({ goal: 'a goal with a day to run', budgets: { maxSeconds: 86_400 } });
  const maintenance = client.queues.get(MAINTENANCE_QUEUE);
  assert.equal(await maintenance.getJobState(deadlineJobId(goalId)), 'delayed');
  assert.deepEqual(await client.cancel(goalId), { cancelled: true, status: 'cancelled' });
  assert.equal(await maintenance.getJob(deadlineJobId(goalId)), undefined, 'still due in a day');
});
