// A deadline job that fires before its goal's time budget ends (a limit raised while it was due,
// hosts' clocks apart) waits again for the real end, as the same job: it used to finish as
// "not yet", and the goal ran on past its limit until the reconciler noticed, a minute or more.
// Real Redis and BullMQ: the reflector's maintenance worker as its service runs it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { maintenanceHandler } from '../../services/reflector/maintenance.ts';
import { deadlineJobId, MAINTENANCE_QUEUE } from '../../shared/runtime/queues.ts';
import { startService } from '../../shared/runtime/service.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

test('a deadline job that comes early waits for the budget to end, then ends the goal', {
  timeout: 30_000,
}, async () => {
  const goalId = await t.newGoal('timed');
  const budgets = { maxSeconds: 2 };
  await redis.client.hset(t.rt.goals.keys.goal(goalId), 'budgets', JSON.stringify(budgets));
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  assert.ok(await t.rt.lifecycle.dispatch(goalId, 1, plan));
  const { createdAt } = (await t.rt.goals.get(goalId))!;
  // Due 1.5 s before the budget's end.
  await t.rt.queues.addDeadline(goalId, createdAt + 500);
  const svc = await startService({
    rt: t.rt,
    name: 'reflector',
    queueName: MAINTENANCE_QUEUE,
    role: 'maintenance',
    concurrency: 1,
    handler: maintenanceHandler(t.rt),
  });
  const queue = new Queue(MAINTENANCE_QUEUE, { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  try {
    const job = async () => queue.getJob(deadlineJobId(goalId));
    await until(async () => ((await job())?.attemptsStarted ?? 0) >= 1, 10_000);
    assert.equal((await t.rt.goals.get(goalId))!.status, 'running', 'ended before its budget ran out');
    assert.equal(await (await job())?.getState(), 'delayed', 'the early job did not wait again');
    await until(async () => (await t.rt.goals.get(goalId))!.status === 'budget_exceeded', 10_000);
    const g = (await t.rt.goals.get(goalId))!;
    assert.ok(g.finishedAt! >= createdAt + 2000, `ended ${g.finishedAt! - createdAt} ms after its creation`);
    assert.match(g.reason ?? '', /time budget exceeded/);
  } finally {
    await queue.close();
    await svc.stop();
  }
});
