// A cancel published while a worker's subscriber is reconnecting (Redis restarted, a network
// blip) is lost: pub/sub delivers at most once. The worker reads its running jobs' goals when
// it reconnects, and aborts the jobs of a goal that ended meanwhile. The services reach Redis
// through a fault proxy that cuts every connection at once; the cancel goes straight to Redis.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { type FaultProxy, startFaultProxy } from '../../testing/fault-proxy.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const LATENCY_MS = 4000;
const redis = useRedis();
let proxy: FaultProxy;
let fleet: Fleet;
let direct: GoalClient;
before(async () => {
  await redis.ready;
  proxy = await startFaultProxy({ host: '127.0.0.1', port: redis.server.port });
  fleet = await startFleet(proxy.url, { DEEPQ_SCRIPTED_LATENCY_MS: String(LATENCY_MS) });
  direct = new GoalClient(loadConfig({ ...fleet.env, REDIS_URL: redis.url }), createRedis(redis.url, 'deepq:test'));
});
after(async () => {
  await direct?.close();
  await fleet?.stop();
  await proxy?.close();
});

test('a cancel missed during a reconnect still aborts the running subtasks', async () => {
  const goalId = await direct.enqueue({ goal: 'Cancel me while the workers reconnect' });
  const started = async () =>
    (await direct.goals.events(goalId)).filter((e) => e.event.type === 'subtask_started').length === 2;
  await until(started, 20_000);
  // Every service connection drops; the cancel lands in Redis before any of them is back.
  proxy.cutAll();
  const cancelledAt = Date.now();
  assert.equal((await direct.cancel(goalId)).status, 'cancelled');
  for (const [role, i] of [
    ['research-specialist', 0],
    ['code-writer', 1],
  ] as const) {
    const queue = direct.queues.get(subagentQueueName(role));
    const done = await until(async () => {
      const job = await queue.getJob(`${goalId}:1:${i}`);
      return job?.finishedOn ? job : undefined;
    }, 20_000);
    assert.equal(done.returnvalue?.skipped, 'cancelled', JSON.stringify(done.returnvalue));
    assert.ok(done.finishedOn! - cancelledAt < LATENCY_MS - 1000, `${role} ran its call to the end`);
  }
});
