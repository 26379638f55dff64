// A Redis at maxmemory (noeviction) refuses a worker's fetches. BullMQ retries a refused fetch
// at once, so without a pause a worker with a job waiting spun on it: thousands of refused
// scripts a second against the Redis that is full. The worker pauses its fetching with a
// backoff instead, and takes the job once Redis accepts writes again.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { startService } from '../../shared/runtime/service.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();

/** EVALSHA calls Redis ran or refused so far (BullMQ's fetches are scripts). */
async function scriptCalls(): Promise<number> {
  const line = (await redis.client.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha:'));
  const field = (name: string) => Number(new RegExp(`${name}=(\\d+)`).exec(line ?? '')?.[1] ?? 0);
  return field('calls') + field('rejected_calls');
}

test('a worker whose fetches Redis refuses at maxmemory backs off, then takes the job once it can', {
  timeout: 90_000,
}, async () => {
  await redis.ready;
  const t = vfsRuntime(redis.url);
  const queue = new Queue('oom-test', { connection: t.rt.bull, prefix: t.rt.cfg.prefix });
  let taken = 0;
  try {
    await queue.add('job', { n: 1 });
    await redis.client.config('SET', 'maxmemory', '1');
    const svc = await startService({
      rt: t.rt,
      name: 'oom-test',
      queueName: 'oom-test',
      role: 'test',
      concurrency: 2,
      handler: async () => {
        taken++;
      },
    });
    try {
      const before = await scriptCalls();
      await new Promise((r) => setTimeout(r, 3000));
      const refused = (await scriptCalls()) - before;
      assert.ok(refused < 30, `${refused} scripts in 3 s against a full Redis: the worker spins`);
      assert.equal(taken, 0);
      await redis.client.config('SET', 'maxmemory', '0');
      await until(() => taken === 1, 45_000);
    } finally {
      await redis.client.config('SET', 'maxmemory', '0');
      await svc.stop();
    }
  } finally {
    await queue.close();
    await t.close();
  }
});
