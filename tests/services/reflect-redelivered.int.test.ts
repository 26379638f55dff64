// A reflect job handed out again (its process died after the decision was stored, before the
// job was acked) finishes the hand-off the decision asked for, and only that one: after an
// escalation a human's resume has already handed the goal on, and must not get a second plan job.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from 'bullmq';
import type { GoalClient } from '../../cli/goal-client.ts';
import { processReflectJob } from '../../services/reflector/reflect-job.ts';
import { PLAN_QUEUE, REFLECT_QUEUE, reflectJobId } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsClient, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
let client: GoalClient;
useVfsClient(redis, (x, c) => {
  t = x;
  client = c;
});

/** The cycle-1 reflect job of the goal as the stalled check hands it out again. */
function redelivered(goalId: string): Job {
  return { id: reflectJobId(goalId, 1), data: { goalId, step: 1 }, queueName: REFLECT_QUEUE } as unknown as Job;
}

async function planJobs(goalId: string): Promise<string[]> {
  const jobs = await t.rt.queues.get(PLAN_QUEUE).getJobs(['waiting', 'prioritized', 'delayed']);
  return jobs.filter((j) => j.data.goalId === goalId).map((j) => String(j.id));
}

test('after an escalation a human resumed, a re-delivered reflect job adds no plan job', async () => {
  const goalId = await t.newGoal('escalated, then resumed');
  assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
  await client.resume(goalId);
  assert.equal((await planJobs(goalId)).length, 1, "the resume's plan job");
  const out = await processReflectJob(t.rt, redelivered(goalId), undefined, 'token');
  assert.deepEqual(await planJobs(goalId), [`${goalId}:2:plan-r1`]);
  assert.equal(out.decision, undefined, `reported ${JSON.stringify(out)}`);
});

test('after a continue was stored, a re-delivered reflect job adds the next plan job (once)', async () => {
  const goalId = await t.newGoal('continued');
  const lc = t.rt.lifecycle;
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  assert.ok(await lc.beginPlanning(goalId));
  assert.ok(await lc.dispatch(goalId, 1, plan));
  assert.ok(await lc.beginReflecting(goalId));
  // The decision is stored; its process dies before adding the plan job.
  assert.ok(await lc.requeue(goalId, { step: 1, reflection: { decision: 'continue', reason: 'more' }, outcomes: [] }));
  assert.deepEqual(await processReflectJob(t.rt, redelivered(goalId), undefined, 'token'), { decision: 'continue' });
  await processReflectJob(t.rt, redelivered(goalId), undefined, 'token');
  assert.deepEqual(await planJobs(goalId), [`${goalId}:2:plan`]);
});
