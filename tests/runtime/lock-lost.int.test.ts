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

interface Run {
  started: number;
  ended?: number;
  /** The abort's reason; unset for a run that went to its end. */
  reason?: unknown;
}

/** A service on its own queue whose n-th run lasts `lastsMs(n)` unless its signal aborts it first. */
async function abortableService(
  queueName: string,
  env: NodeJS.ProcessEnv,
  concurrency: number,
  lastsMs: (n: number) => number,
) {
  await redis.ready;
  const t = vfsRuntime(redis.url, env);
  const queue = new Queue(queueName, { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  const runs: Run[] = [];
  const svc = await startService({
    rt: t.rt,
    name: queueName,
    queueName,
    role: 'test',
    concurrency,
    handler: (_job, signal) =>
      new Promise((resolve) => {
        const run: Run = { started: Date.now() };
        runs.push(run);
        const finish = (reason?: unknown) => {
          Object.assign(run, { ended: Date.now(), reason });
          resolve(reason === undefined ? 'done' : undefined);
        };
        const done = setTimeout(finish, lastsMs(runs.length));
        signal.addEventListener('abort', () => {
          clearTimeout(done);
          finish(signal.reason);
        });
      }),
  });
  const lockKey = (jobId: string) => `${t.rt.cfg.prefix}:${queueName}:${jobId}:lock`;
  const close = async () => {
    await svc.stop();
    await queue.close();
    await t.close();
  };
  return { queue, runs, lockKey, close };
}

test('a run whose lock was lost is aborted, naming why', { timeout: 60_000 }, async () => {
  const env = { DEEPQ_LOCK_DURATION_MS: '2000', DEEPQ_STALLED_INTERVAL_MS: '30000' };
  const { queue, runs, lockKey, close } = await abortableService('lock-test', env, 1, () => 25_000);
  try {
    const job = await queue.add('job', {});
    await until(() => runs.length === 1, 10_000);
    // The lock expires before its renewal (every 1 s with a 2 s lock) gets to it.
    assert.equal(await redis.client.del(lockKey(job.id!)), 1);
    await until(() => runs[0]!.ended !== undefined, 15_000);
    assert.equal(runs[0]!.reason, 'lock lost');
    const after = runs[0]!.ended! - runs[0]!.started;
    assert.ok(after < 15_000, `aborted after ${after} ms`);
  } finally {
    await close();
  }
});

test('a job handed back to the same process while its first run goes on runs once at a time', {
  timeout: 60_000,
}, async () => {
  // BullMQ tracks a process's runs by job id: with room for more than one job, the stalled
  // check's delivery lands beside the first run, in the same process. The first run lasts
  // until aborted; a later one finishes in half a second.
  const env = { DEEPQ_LOCK_DURATION_MS: '4000', DEEPQ_STALLED_INTERVAL_MS: '300' };
  const { queue, runs, lockKey, close } = await abortableService('same-process', env, 4, (n) =>
    n === 1 ? 30_000 : 500,
  );
  try {
    const job = await queue.add('job', {}, { attempts: 3 });
    await until(() => runs.length === 1, 10_000);
    assert.equal(await redis.client.del(lockKey(job.id!)), 1);
    await until(async () => (await queue.getJob(job.id!))?.finishedOn !== undefined, 30_000);
    const finished = (await queue.getJob(job.id!))!;
    assert.equal(await finished.getState(), 'completed', finished.failedReason);
    assert.equal(finished.returnvalue, 'done');
    assert.equal(runs[0]!.reason, 'lock lost');
    assert.equal(runs.length, 2, 'the first run, then one more');
    assert.ok(runs[1]!.started >= runs[0]!.ended!, 'the second run started after the first one stopped');
  } finally {
    await close();
  }
});
