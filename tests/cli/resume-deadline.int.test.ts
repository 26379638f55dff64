// `resume --max-seconds N` moves the goal's deadline job to N seconds from now: BullMQ ignores
// an add with an id it already holds, so a new, shorter time limit was only noticed at the next
// model call or cycle, never by the deadline that ends a goal mid-cycle.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../shared/runtime/config.ts';
import { deadlineJobId, MAINTENANCE_QUEUE } from '../../shared/runtime/queues.ts';
import { openState } from '../../shared/runtime/state.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('resume --max-seconds replaces the pending deadline job with one at the new limit', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const enq = await runCli(['enqueue', 'a goal', '--max-seconds', '3600', '--on-budget', 'pause'], env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  const state = openState(loadConfig(env), 'test');
  try {
    const deadline = () => state.queues.get(MAINTENANCE_QUEUE).getJob(deadlineJobId(goalId));
    assert.equal((await deadline())?.delay, 3_600_050);
    // Paused at its time budget (no services run here), then resumed with 30 more seconds.
    const hit = { kind: 'seconds' as const, reason: 'time budget exceeded (stand-in)' };
    assert.ok(await state.lifecycle.pauseForBudget(goalId, hit, 1));
    const resumed = await runCli(['resume', goalId, '--max-seconds', '30'], env);
    assert.equal(resumed.code, 0, resumed.stderr);
    const job = await deadline();
    assert.ok(job, 'no deadline job');
    assert.equal(job.delay, 30_050);
    assert.equal(await job.getState(), 'delayed');
    const firesIn = job.timestamp + job.delay - Date.now();
    assert.ok(firesIn > 20_000 && firesIn <= 30_050, `fires in ${firesIn} ms`);
  } finally {
    await state.close();
  }
});
