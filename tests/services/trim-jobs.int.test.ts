// The completed-jobs cap: BullMQ keeps completed jobs an hour (no count check per completion);
// the sweep removes each queue's oldest completed jobs beyond DEEPQ_COMPLETED_JOBS_KEPT, and
// touches neither newer completed jobs nor waiting or failed ones.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Job, Worker } from 'bullmq';
import { sweep } from '../../services/reflector/sweep.ts';
import { trimCompletedJobs } from '../../services/reflector/trim-jobs.ts';
import { PLAN_QUEUE, REFLECT_QUEUE } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
before(async () => {
  await redis.ready;
  t = vfsRuntime(redis.url, { DEEPQ_COMPLETED_JOBS_KEPT: '3' });
});
after(() => t?.close());

/** Adds `ids` to the queue and lets a worker complete them, or fail the ones named `fail-*`, in order. */
async function finishJobs(queueName: string, ids: string[]): Promise<void> {
  const queue = t.rt.queues.get(queueName);
  for (const id of ids) await queue.add('j', {}, { jobId: id, attempts: 1 });
  const worker = new Worker(
    queueName,
    async (job: Job) => {
      if (String(job.id).startsWith('fail-')) throw new Error('planned failure');
    },
    { connection: t.rt.bull, prefix: t.rt.cfg.prefix, concurrency: 1 },
  );
  try {
    await until(async () => (await queue.getCompletedCount()) + (await queue.getFailedCount()) === ids.length);
  } finally {
    await worker.close();
  }
}

test('completed jobs carry no per-job count cap: all of them stay until the sweep', async () => {
  await finishJobs(PLAN_QUEUE, ['p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'fail-1']);
  const queue = t.rt.queues.get(PLAN_QUEUE);
  assert.equal(await queue.getCompletedCount(), 6);
  const job = await queue.getJob('p1');
  assert.deepEqual(job?.opts.removeOnComplete, { age: 3600 });
});

test('the sweep keeps the newest completed jobs of each queue and removes the oldest', async () => {
  await finishJobs(REFLECT_QUEUE, ['r1', 'r2']);
  const report = await sweep(t.rt);
  assert.equal(report.jobsTrimmed, 3, 'p1, p2 and p3 of the plan queue; the reflect queue is under the cap');
  const plan = t.rt.queues.get(PLAN_QUEUE);
  const kept = (await plan.getCompleted()).map((j) => j.id).sort();
  assert.deepEqual(kept, ['p4', 'p5', 'p6']);
  assert.equal(await plan.getJob('p1'), undefined, 'the removed job hash is gone too');
  assert.equal(await plan.getFailedCount(), 1, 'failed jobs are not completed jobs');
  assert.equal(await t.rt.queues.get(REFLECT_QUEUE).getCompletedCount(), 2);
  assert.equal(await trimCompletedJobs(t.rt), 0, 'a second pass has nothing left to trim');
});
