// `deepq cancel` stops a goal across processes: running model calls abort, waiting jobs go,
// the status becomes cancelled, artifacts stay until the sweep.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PLAN_QUEUE, planJobId, subagentQueueName } from '../../shared/runtime/queues.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let fleet: Fleet;
before(async () => {
  await redis.ready;
  // Long model latency: the cancel lands while subtasks are mid-call, even on a busy machine
  // where the CLI takes seconds to start.
  fleet = await startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '10000' });
});
after(async () => fleet?.stop());

async function until<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('cancel aborts running subtasks in worker processes and marks the goal cancelled', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Cancel me' });
  // Wait until both cycle-1 subtasks are running in their worker processes.
  await until(
    async () =>
      (await fleet.client.goals.events(goalId)).filter((e) => e.event.type === 'subtask_started').length === 2,
  );
  const cancelledAt = Date.now();
  const r = await runCli(['cancel', goalId], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`cancelled ${goalId}`));
  assert.equal((await fleet.client.get(goalId)).status, 'cancelled');

  // The running jobs finish as aborted long before their 10 s model call would have ended.
  for (const [role, i] of [
    ['research-specialist', 0],
    ['code-writer', 1],
  ] as const) {
    const job = await fleet.client.queues.get(subagentQueueName(role)).getJob(`${goalId}:1:${i}`);
    await until(async () => (await job!.getState()) === 'completed' || undefined);
    const fresh = await fleet.client.queues.get(subagentQueueName(role)).getJob(`${goalId}:1:${i}`);
    assert.equal(fresh!.returnvalue.skipped, 'cancelled', JSON.stringify(fresh!.returnvalue));
    assert.ok(fresh!.finishedOn! - cancelledAt < 7000, 'the model call was not aborted');
  }
  // Nothing finished normally, no later cycle was planned, the status stays cancelled.
  await new Promise((r) => setTimeout(r, 500));
  const types = (await fleet.client.goals.events(goalId)).map((e) => e.event.type);
  assert.ok(!types.includes('subtask_finished'));
  assert.ok(!types.includes('reflected'));
  assert.equal((await fleet.client.get(goalId)).status, 'cancelled');
});

test("a cancel during the planner's model call ends its job skipped, with no failed attempt", async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Cancel me while planning' });
  const plan = fleet.client.queues.get(PLAN_QUEUE);
  await until(async () => (await fleet.client.get(goalId)).status === 'planning');
  await fleet.client.cancel(goalId);
  await until(async () => (await (await plan.getJob(planJobId(goalId, 1)))!.getState()) === 'completed', 7000);
  const job = (await plan.getJob(planJobId(goalId, 1)))!;
  assert.deepEqual(job.returnvalue, { status: 'skipped', reason: 'the goal is cancelled' });
  assert.equal(job.attemptsMade, 1, 'the cancel cost the job an attempt (it failed, then was retried)');
  assert.equal(job.failedReason, undefined);
  const planner = fleet.procs.find((p) => p.name === 'planner')!.output();
  assert.doesNotMatch(planner, new RegExp(`"jobId":"${goalId}:1:plan".*job failed`));
});

test('cancel removes waiting jobs and keeps artifacts already written', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Cancel between cycles' });
  await fleet.client.vfs.write(goalId, 'keep.md', 'written before the cancel', {
    status: 'done',
    step: 1,
    writer: 'test',
  });
  // Cancel before the planner has taken the job: it must not run at all.
  await fleet.client.cancel(goalId);
  await new Promise((r) => setTimeout(r, 1000));
  const g = await fleet.client.get(goalId);
  assert.equal(g.status, 'cancelled');
  assert.equal(g.planStep, 0, 'a cancelled goal was planned');
  assert.equal(await fleet.client.read(goalId, 'keep.md'), 'written before the cancel');
});

test('cancelling an unknown goal id is a clear error', async () => {
  const r = await runCli(['cancel', 'nosuchgoal1'], fleet.env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /deepq: error: unknown goal id: nosuchgoal1/);
});
