// A job's lock lost (a Redis too slow to renew it in time; here the lock key is removed, as its
// expiry would): the stalled check will hand the job out again, so the run holding the lost
// lock stops instead of going on beside the next delivery (the same subtask twice, its tokens
// twice).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { startService } from '../../shared/runtime/service.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();

test('a run whose lock was lost is aborted, naming why', { timeout: 60_000 }, async () => {
  await redis.ready;
  const t = vfsRuntime(redis.url, { DEEPQ_LOCK_DURATION_MS: '2000', DEEPQ_STALLED_INTERVAL_MS: '30000' });
  const queue = new Queue('lock-test', { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  const runs: { started: number; abortedAfterMs?: number; reason?: unknown }[] = [];
  const svc = await startService({
    rt: t.rt,
    name: 'lock-test',
    queueName: 'lock-test',
    role: 'test',
    concurrency: 1,
    // A long run that ends early only when its signal aborts.
    handler: (_job, signal) =>
      new Promise((resolve) => {
        const run: (typeof runs)[number] = { started: Date.now() };
        runs.push(run);
        const done = setTimeout(resolve, 25_000);
        signal.addEventListener('abort', () => {
          clearTimeout(done);
          Object.assign(run, { abortedAfterMs: Date.now() - run.started, reason: signal.reason });
          resolve(undefined);
        });
      }),
  });
  try {
    const job = await queue.add('job', {});
    await until(() => runs.length === 1, 10_000);
    // The lock expires before its renewal (every 1 s with a 2 s lock) gets to it.
    assert.equal(await redis.client.del(`${t.rt.cfg.prefix}:lock-test:${job.id}:lock`), 1);
    await until(() => runs[0]!.abortedAfterMs !== undefined, 15_000);
    assert.equal(runs[0]!.reason, 'lock lost');
    assert.ok(runs[0]!.abortedAfterMs! < 15_000, `aborted after ${runs[0]!.abortedAfterMs} ms`);
  } finally {
    await svc.stop();
    await queue.close();
    await t.close();
  }
});

test('a job handed back to the same process while its first run goes on runs once at a time', {
  timeout: 60_000,
}, async () => {
  await redis.ready;
  const t = vfsRuntime(redis.url, { DEEPQ_LOCK_DURATION_MS: '4000', DEEPQ_STALLED_INTERVAL_MS: '300' });
  const queue = new Queue('same-process', { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  const runs: { started: number; ended?: number; reason?: unknown }[] = [];
  // BullMQ tracks a process's runs by job id: with room for more than one job, the stalled
  // check's delivery lands beside the first run, in the same process.
  const svc = await startService({
    rt: t.rt,
    name: 'same-process',
    queueName: 'same-process',
    role: 'test',
    concurrency: 4,
    // The first run lasts until aborted; a later one finishes in half a second.
    handler: (_job, signal) =>
      new Promise((resolve) => {
        const run: (typeof runs)[number] = { started: Date.now() };
        runs.push(run);
        const finish = (reason?: unknown) => {
          Object.assign(run, { ended: Date.now(), reason });
          resolve(reason ? undefined : 'done');
        };
        const done = setTimeout(finish, runs.length === 1 ? 30_000 : 500);
        signal.addEventListener('abort', () => {
          clearTimeout(done);
          finish(signal.reason);
        });
      }),
  });
  try {
    const job = await queue.add('job', {}, { attempts: 3 });
    await until(() => runs.length === 1, 10_000);
    assert.equal(await redis.client.del(`${t.rt.cfg.prefix}:same-process:${job.id}:lock`), 1);
    await until(async () => (await queue.getJob(job.id!))?.finishedOn !== undefined, 30_000);
    const finished = (await queue.getJob(job.id!))!;
    assert.equal(await finished.getState(), 'completed', finished.failedReason);
    assert.equal(finished.returnvalue, 'done');
    assert.equal(runs[0]!.reason, 'lock lost');
    assert.equal(runs.length, 2, 'the first run, then one more');
    assert.ok(runs[1]!.started >= runs[0]!.ended!, 'the second run started after the first one stopped');
  } finally {
    await svc.stop();
    await queue.close();
    await t.close();
  }
});
