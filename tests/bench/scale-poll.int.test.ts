// The scale bench's drain poll counts the Redis commands it sends exactly, so a backlog's
// commands per goal can leave the bench's own out: INFO commandstats sees as many as it says.
// (BullMQ's getJobCounts runs a script, whose inner commands commandstats counts as well.)

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { commandStats } from '../../bench/common.ts';
import { jobCounts } from '../../bench/scale.ts';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE, REFLECT_QUEUE, subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let client: GoalClient;
let queues: string[];

before(async () => {
  await redis.ready;
  const cfg = loadConfig(testEnv(redis.url, { LOG_LEVEL: 'silent' }));
  client = new GoalClient(cfg, createRedis(redis.url, 'deepq:test'));
  queues = [PLAN_QUEUE, REFLECT_QUEUE, ...cfg.roles.map((r) => subagentQueueName(r.name))];
});
after(() => client?.close());

test("the drain poll's job counts match BullMQ's, and it sends exactly the commands it reports", async () => {
  const plan = client.queues.get(PLAN_QUEUE);
  await plan.add('plan', { goalId: 'g1', step: 1 });
  await plan.add('plan', { goalId: 'g2', step: 1 });
  await plan.add('plan', { goalId: 'g3', step: 1 }, { delay: 60_000 });
  const live = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;
  let bull = 0;
  for (const q of queues) {
    const c = await client.queues.get(q).getJobCounts(...live);
    bull += live.reduce((s, k) => s + (c[k] ?? 0), 0);
  }
  assert.equal(bull, 3);
  // The connection and every queue are up before the count is taken.
  await jobCounts(client, queues);

  const cmd0 = await commandStats(redis.client);
  const counts = await jobCounts(client, queues);
  const cmd1 = await commandStats(redis.client);
  assert.deepEqual({ live: counts.live, finished: counts.finished }, { live: 3, finished: 0 });
  assert.equal(counts.commands, 7 * queues.length);
  assert.equal(cmd1.calls - cmd0.calls, counts.commands, 'commandstats saw a different number of commands');

  // What the poll used before: one call, more commands than calls.
  const before = await commandStats(redis.client);
  await plan.getJobCounts(...live, 'completed', 'failed');
  const after = await commandStats(redis.client);
  assert.ok(after.calls - before.calls > 1, `getJobCounts cost ${after.calls - before.calls} command(s)`);
});
