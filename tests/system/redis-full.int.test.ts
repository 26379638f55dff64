// Redis full (maxmemory with noeviction): writes fail. `enqueue` says so clearly and stores
// nothing; a running goal keeps a consistent file index (no half-written artifact) and, once
// memory is freed, carries on to done by itself (job retries, the stalled check, the
// reconciler); new goals run again. A subtask whose writes Redis refused goes back to its
// queue without using an attempt: Redis full for longer than its retries' backoff fails none.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { assertCliExit, type Fleet, metricSum, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();
let fleet: Fleet;
const JUNK = 'junk:';

before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, {
    DEEPQ_SCRIPTED_LATENCY_MS: '800',
    DEEPQ_RECONCILE_INTERVAL_SECONDS: '1',
    DEEPQ_RECONCILE_GRACE_SECONDS: '3',
    DEEPQ_LOCK_DURATION_MS: '4000',
    DEEPQ_STALLED_INTERVAL_MS: '1000',
  });
});
after(async () => fleet?.stop());

/** Caps Redis at a little above what it uses now, then fills it until a write is refused. */
async function fillRedis(): Promise<number> {
  const used = Number(/used_memory:(\d+)/.exec(await redis.client.info('memory'))![1]);
  await redis.client.config('SET', 'maxmemory-policy', 'noeviction');
  await redis.client.config('SET', 'maxmemory', String(used + 4 * 1024 * 1024));
  const chunk = 'x'.repeat(64 * 1024);
  for (let i = 0; ; i++) {
    try {
      await redis.client.set(`${JUNK}${i}`, chunk);
    } catch (err) {
      assert.match((err as Error).message, /OOM/);
      // Keep it full: freed client buffers must not let the next write slip under the cap.
      const now = Number(/used_memory:(\d+)/.exec(await redis.client.info('memory'))![1]);
      await redis.client.config('SET', 'maxmemory', String(Math.floor(now / 2)));
      return i;
    }
  }
}

/** Waits until each of the first cycle's subtask jobs was delivered `times` times, or failed. */
async function untilHandedOut(goalId: string, times: number): Promise<void> {
  const dispatched = (await fleet.client.goals.events(goalId)).find((e) => e.event.type === 'dispatched')!.event;
  assert.ok(dispatched.type === 'dispatched');
  for (const t of dispatched.subtasks) {
    const queue = fleet.client.queues.get(subagentQueueName(t.role));
    const handedOut = async () => {
      const job = await queue.getJob(`${goalId}:1:${t.index}`);
      return job && (job.attemptsStarted >= times || (await job.isFailed()));
    };
    await until(handedOut, 60_000, `${t.role}'s job handed out ${times} times while Redis is full`, 100);
  }
}

async function freeRedis(): Promise<void> {
  const keys = await redis.client.keys(`${JUNK}*`);
  for (let i = 0; i < keys.length; i += 500) await redis.client.del(...keys.slice(i, i + 500));
  await redis.client.config('SET', 'maxmemory', '0');
}

test('a goal running when Redis fills up keeps a consistent index and ends done once memory is freed', async () => {
  const c = fleet.client;
  const goalId = await c.enqueue({ goal: 'Running while Redis fills up' });
  const started = async () => (await c.goals.events(goalId)).some((e) => e.event.type === 'subtask_started');
  while (!(await started())) await new Promise((r) => setTimeout(r, 50));
  await fillRedis();
  // Full until each subtask was handed out 3 times, its writes refused each time: had a refusal
  // used an attempt, all of them would be gone. (A fixed wait was not enough: after another test had
  // filled Redis, a retry could wait past it and the old behaviour passed.)
  await untilHandedOut(goalId, fleet.cfg.subtaskAttempts);
  // deepq_redis_up stays 1 (a PING needs no memory): the refusals are what is counted.
  assert.ok((await metricSum(fleet, 'deepq_redis_full_total', { where: 'job' })) >= 2, 'counted');
  await freeRedis();
  const g = await c.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  const cycle1 = (await c.goals.events(goalId)).find((e) => e.event.type === 'reflected')!.event;
  assert.ok(cycle1.type === 'reflected');
  assert.deepEqual(
    cycle1.outcomes.map((o) => o.status),
    ['done', 'done'],
    'no subtask of the first cycle failed for good',
  );
  for (const f of await c.artifacts(goalId)) {
    const content = await c.read(goalId, f.name);
    assert.ok(content !== null && Buffer.byteLength(content) === f.bytes, `${f.name}: index and content agree`);
  }
});

test('enqueue on a full Redis fails with a clear message and stores nothing', async () => {
  const before = await redis.client.zcard(`${fleet.cfg.prefix}:goals`);
  await fillRedis();
  try {
    const r = await runCli(['enqueue', 'A goal for a full Redis'], fleet.env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Redis is out of memory/);
    assert.equal(await redis.client.zcard(`${fleet.cfg.prefix}:goals`), before, 'no goal was stored');
  } finally {
    await freeRedis();
  }
  const r = await runCli(['enqueue', '--wait', 'A goal once memory is back'], fleet.env);
  await assertCliExit(r, 0, fleet);
});
