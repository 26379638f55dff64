// deepq_jobs_total as the failure alert reads it: `failed` only for a job that fails for good
// (an attempt that is retried is `retried`), a job BullMQ fails before any processor ran
// (stalled too often) counted too, a run its goal's cancel stopped is `aborted`, not completed,
// and the series the alerts read exist at zero from the start. Real Redis and BullMQ.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { startService } from '../../shared/runtime/service.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const QUEUE = 'subagent-metrics-test';
const counts = async () => {
  const out: Record<string, number> = {};
  for (const v of (await t.rt.metrics.jobs.get()).values) if (v.labels.queue === QUEUE) out[v.labels.status!] = v.value;
  return out;
};

test('failed counts jobs that fail for good; retried attempts, cancelled runs and zero series apart', {
  timeout: 30_000,
}, async () => {
  // The cancel goes out once the run is under way: BullMQ marks a job active a moment before its
  // processor runs (a cancel before that finds no run; a real job then reads its goal's status).
  let longStarted = () => {};
  const started = new Promise<void>((r) => {
    longStarted = r;
  });
  const handler = async (job: { data: { kind: string }; attemptsMade: number }, signal: AbortSignal) => {
    if (job.data.kind === 'flaky' && job.attemptsMade === 0) throw new Error('flaky the first time');
    if (job.data.kind === 'broken') throw new Error('always broken');
    if (job.data.kind === 'long') {
      longStarted();
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    }
    return { ok: true };
  };
  const svc = await startService({
    rt: t.rt,
    name: 'worker',
    queueName: QUEUE,
    role: 'tester',
    concurrency: 2,
    handler,
  });
  const queue = new Queue(QUEUE, { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  try {
    assert.deepEqual(await counts(), { completed: 0, failed: 0 }, 'the series exist before any job');
    const full = (await t.rt.metrics.redisFull.get()).values.map((v) => `${v.labels.where}=${v.value}`);
    assert.deepEqual(full.sort(), ['fetch=0', 'job=0'], 'a full Redis is counted from 0: increase() sees its first');
    const opts = { attempts: 2, backoff: { type: 'fixed', delay: 10 } };
    await queue.add('j', { goalId: 'flakygoal01', kind: 'flaky' }, { ...opts, jobId: 'flaky' });
    await queue.add('j', { goalId: 'brokengoal1', kind: 'broken' }, { ...opts, jobId: 'broken' });
    await until(async () => (await queue.getJobState('broken')) === 'failed', 10_000);
    await until(async () => (await queue.getJobState('flaky')) === 'completed', 10_000);
    assert.deepEqual(await counts(), { completed: 1, failed: 1, retried: 2 });
    // A run its goal's cancel stops returns as skipped: counted aborted.
    await queue.add('j', { goalId: 'longgoal001', kind: 'long' }, { jobId: 'long' });
    await started;
    await t.rt.redis.publish(t.rt.goals.keys.cancelChannel(), 'longgoal001');
    await until(async () => (await queue.getJobState('long')) === 'completed', 10_000);
    assert.deepEqual(await counts(), { completed: 1, failed: 1, retried: 2, aborted: 1 });
  } finally {
    await queue.close();
    await svc.stop();
  }
});
