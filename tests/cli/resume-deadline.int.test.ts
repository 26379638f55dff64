// `resume --max-seconds N` moves the goal's deadline job to the new limit, N seconds from now:
// BullMQ ignores an add with an id it already holds, so a new, shorter time limit was only
// noticed at the next model call or cycle, never by the deadline that ends a goal mid-cycle. The
// job fires at the limit as stored (whole seconds from the goal's creation), not before it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../shared/runtime/config.ts';
import { DEADLINE_MARGIN_MS, deadlineJobId, MAINTENANCE_QUEUE } from '../../shared/runtime/queues.ts';
import { openState } from '../../shared/runtime/state.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('resume --max-seconds replaces the pending deadline job with one at the new limit', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const enq = await runCli(['enqueue', 'a goal', '--max-seconds', '2', '--on-budget', 'pause'], env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  const state = openState(loadConfig(env), 'test');
  try {
    const deadline = () => state.queues.get(MAINTENANCE_QUEUE).getJob(deadlineJobId(goalId));
    const g = (await state.goals.get(goalId))!;
    const firesAt = async () => {
      const job = (await deadline())!;
      return job.timestamp + job.delay;
    };
    const limitOf = async () => g.createdAt + (await state.goals.get(goalId))!.budgets.maxSeconds! * 1000;
    const after = async () => (await firesAt()) - (await limitOf());
    assert.ok((await after()) >= 0 && (await after()) < 1000, `fires ${await after()} ms after the limit`);
    // Paused at its time budget once past it (no services run here), then resumed with 30 more seconds.
    await new Promise((r) => setTimeout(r, Math.max(0, g.createdAt + 2100 - Date.now())));
    const hit = { kind: 'seconds' as const, reason: 'time budget exceeded (stand-in)' };
    assert.ok(await state.lifecycle.pauseForBudget(goalId, hit, 1));
    const resumed = await runCli(['resume', goalId, '--max-seconds', '30'], env);
    assert.equal(resumed.code, 0, resumed.stderr);
    const job = await deadline();
    assert.ok(job, 'no deadline job');
    assert.equal(await job.getState(), 'delayed');
    const firesIn = job.timestamp + job.delay - Date.now();
    assert.ok(firesIn > 20_000 && firesIn <= 31_050, `fires in ${firesIn} ms`);
    // At the stored limit (rounded up to a whole second) plus the margin, not before it.
    const late = await after();
    assert.ok(late >= DEADLINE_MARGIN_MS && late < 1000, `fires ${late} ms after the limit`);
  } finally {
    await state.close();
  }
});
