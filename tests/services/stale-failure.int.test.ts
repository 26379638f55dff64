// A plan or reflect job's failure fails its goal only while the goal is at that job's cycle: a
// delivery whose lock ran out during its model call (another delivery did the cycle, and the goal
// went on) and whose answer is then rejected twice, or a job that failed for good after the goal
// moved on (BullMQ's "stalled too often"), must not fail the goal's later cycle, nor a goal a
// human is asked about. Real Redis and BullMQ queues; the model's answer is made unreadable.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from 'bullmq';
import { processPlanJob } from '../../services/planner/plan-job.ts';
import { processReflectJob } from '../../services/reflector/reflect-job.ts';
import { failGoalOnFinalFailure } from '../../shared/goal/final-failure.ts';
import { PLAN_QUEUE, planJobId, REFLECT_QUEUE, reflectJobId } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
const planJob = (goalId: string) => ({ id: planJobId(goalId, 1), data: { goalId, step: 1 }, queueName: PLAN_QUEUE });

/** Every answer unreadable (no contract holds); during the first call, `meanwhile` moves the goal on. */
function unreadableModel(meanwhile: () => Promise<void>): () => void {
  type Call = (...a: unknown[]) => Promise<{ content: { type: string; text?: string }[] }>;
  const provider = t.rt.provider as unknown as { createMessage: Call };
  const real = provider.createMessage.bind(provider);
  let first = true;
  provider.createMessage = async (...a) => {
    if (first) {
      first = false;
      await meanwhile();
    }
    return { ...(await real(...a)), content: [{ type: 'text', text: 'this is not JSON at all' }] };
  };
  return () => {
    provider.createMessage = real;
  };
}

test("a late reflect delivery's rejected answer leaves the goal reflecting its next cycle", async () => {
  const lc = t.rt.lifecycle;
  const goalId = await t.newGoal('stale reflect');
  assert.ok(await lc.beginPlanning(goalId));
  assert.ok(await lc.dispatch(goalId, 1, plan));
  const restore = unreadableModel(async () => {
    assert.ok(await lc.requeue(goalId, { step: 1, reflection: { decision: 'continue', reason: 'r' }, outcomes: [] }));
    assert.ok(await lc.beginPlanning(goalId));
    assert.ok(await lc.dispatch(goalId, 2, plan));
    assert.ok(await lc.beginReflecting(goalId));
  });
  const job = {
    id: reflectJobId(goalId, 1),
    data: { goalId, step: 1 },
    queueName: REFLECT_QUEUE,
    getChildrenValues: async () => ({}),
    getIgnoredChildrenFailures: async () => ({}),
  } as unknown as Job;
  try {
    await processReflectJob(t.rt, job, undefined, 'token');
  } finally {
    restore();
  }
  const g = await t.rt.goals.get(goalId);
  assert.deepEqual([g?.status, g?.step], ['reflecting', 2], g?.reason ?? undefined);
});

test("a late plan delivery's rejected answer leaves the goal planning its next cycle", async () => {
  const lc = t.rt.lifecycle;
  const goalId = await t.newGoal('stale plan');
  const restore = unreadableModel(async () => {
    assert.ok(await lc.dispatch(goalId, 1, plan));
    assert.ok(await lc.beginReflecting(goalId));
    assert.ok(await lc.requeue(goalId, { step: 1, reflection: { decision: 'continue', reason: 'r' }, outcomes: [] }));
    assert.ok(await lc.beginPlanning(goalId));
  });
  try {
    await processPlanJob(t.rt, planJob(goalId) as unknown as Job, undefined, 'token');
  } finally {
    restore();
  }
  const g = await t.rt.goals.get(goalId);
  assert.equal(g?.status, 'planning', g?.reason ?? undefined);
  // At its own cycle a rejected plan still fails the goal.
  const own = await t.newGoal('plan rejected at its cycle');
  const undo = unreadableModel(async () => {});
  try {
    await processPlanJob(t.rt, planJob(own) as unknown as Job, undefined, 'token');
  } finally {
    undo();
  }
  assert.equal((await t.rt.goals.get(own))?.status, 'failed');
});

test('a plan job that failed for good after the goal moved on fails nothing; at its cycle, the goal', async () => {
  const goalId = await t.newGoal('asked a human');
  assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
  const stalled = new Error('job stalled more than allowable limit');
  await failGoalOnFinalFailure(t.rt, 'planning')(planJob(goalId) as unknown as Job, stalled);
  assert.equal((await t.rt.goals.get(goalId))?.status, 'awaiting_human');
  const queued = await t.newGoal('never planned');
  await failGoalOnFinalFailure(t.rt, 'planning')(planJob(queued) as unknown as Job, stalled);
  const g = await t.rt.goals.get(queued);
  assert.deepEqual([g?.status, g?.reason], ['failed', 'planning failed: job stalled more than allowable limit']);
});
