// Work under way before new goals: a goal's later plan jobs are taken before the first plan
// jobs of goals enqueued earlier (a flood of new goals held a running goal's next cycle behind
// all of them, 7x its latency for 300 new goals); new goals among themselves keep their order.
// Real Redis and BullMQ.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'bullmq';
import { newGoalId } from '../../shared/goal/ids.ts';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

test("a running goal's next plan job goes before new goals' first; new goals first come, first served", async () => {
  const fresh = Array.from({ length: 20 }, () => newGoalId());
  for (const goalId of fresh) await t.rt.queues.addPlan({ goalId, step: 1 });
  const running = newGoalId();
  await t.rt.queues.addPlan({ goalId: running, step: 2 });
  // A resumed goal's plan (attempt suffix) is work under way too.
  const resumed = newGoalId();
  await t.rt.queues.addPlan({ goalId: resumed, step: 3 }, 1);
  const worker = new Worker(PLAN_QUEUE, null, { connection: t.rt.bull, prefix: t.rt.cfg.prefix, autorun: false });
  try {
    const taken: string[] = [];
    for (let i = 0; i < 22; i++) {
      const job = await worker.getNextJob(`tok-${i}`, { block: false });
      assert.ok(job, `job ${i} not taken`);
      taken.push(`${job.data.goalId}:${job.data.step}`);
    }
    assert.deepEqual(taken, [`${running}:2`, `${resumed}:3`, ...fresh.map((g) => `${g}:1`)]);
  } finally {
    await worker.close();
  }
});
