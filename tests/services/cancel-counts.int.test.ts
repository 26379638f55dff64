// A goal cancelled from the CLI is counted once (deepq_goals_total, deepq_goal_cycles) by the
// reflectors, however many run: the CLI has no metrics registry of its own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { countCancel } from '../../services/reflector/cancel-counts.ts';
import { sweep } from '../../services/reflector/sweep.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { createRuntime } from '../../shared/runtime/runtime.ts';
import { metricSum, runCli, startFleet, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman } from '../../testing/vfs-runtime.ts';

const redis = useRedis();

async function eventually(read: () => Promise<number>, want: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const got = await read();
    if (got === want || Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a goal cancelled from the CLI is counted once across two reflectors, at its cycle', async () => {
  await redis.ready;
  // Slow model calls: the goal is still at its first cycle when the cancel comes.
  const fleet = await startFleet(
    redis.url,
    { DEEPQ_SCRIPTED_LATENCY_MS: '3000' },
    { roles: [], replicas: 2, replicateAll: true },
  );
  try {
    const cancelled = { status: 'cancelled' };
    const before = await metricSum(fleet, 'deepq_goals_total', cancelled);
    const goalId = await fleet.client.enqueue({ goal: 'a goal cancelled while it plans' });
    const cli = await runCli(['cancel', goalId], fleet.env);
    assert.equal(cli.code, 0, cli.stderr);
    const counted = await eventually(() => metricSum(fleet, 'deepq_goals_total', cancelled), before + 1);
    assert.equal(counted, before + 1, 'counted once, by one of the two reflectors');
    assert.equal(await metricSum(fleet, 'deepq_goal_cycles_count', cancelled), 1);
    // Cancelled at its first cycle, before any plan was dispatched: step 0.
    assert.equal(await metricSum(fleet, 'deepq_goal_cycles_sum', cancelled), 0);
    // A second cancel of the ended goal publishes again; nothing is counted twice.
    assert.equal((await runCli(['cancel', goalId], fleet.env)).code, 0);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await metricSum(fleet, 'deepq_goals_total', cancelled), before + 1);
  } finally {
    await fleet.stop();
  }
});

test('a goal a human ends as done after an escalation is counted once, at its cycle', async () => {
  await redis.ready;
  // At max depth 1 the scripted reflection's "continue" becomes an escalation.
  const fleet = await startFleet(redis.url, { DEEPQ_MAX_DEPTH: '1' });
  try {
    const done = { status: 'done' };
    const goalId = await fleet.client.enqueue({ goal: 'a goal that escalates at max depth' });
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
    assert.deepEqual([g.status, g.pausedFor], ['awaiting_human', 'escalation'], g.reason ?? '');
    assert.equal(await metricSum(fleet, 'deepq_goal_cycles_count', done), 0);
    const cli = await runCli(['resume', goalId, '--end'], fleet.env);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(await eventually(() => metricSum(fleet, 'deepq_goals_total', done), 1), 1);
    assert.equal(await metricSum(fleet, 'deepq_goal_cycles_count', done), 1);
    assert.equal(await metricSum(fleet, 'deepq_goal_cycles_sum', done), 1, 'at its cycle, 1');
  } finally {
    await fleet.stop();
  }
});

test('a cancel and an end no reflector heard are counted by the next sweep, once', async () => {
  await redis.ready;
  // No service runs: the CLI moves the goals and publishes to nobody.
  const cfg = loadConfig(testEnv(redis.url, { DEEPQ_PREFIX: 'uncounted' }));
  const client = new GoalClient(cfg);
  const rt = createRuntime(cfg, 'reflector');
  try {
    const cancelledId = await client.enqueue({ goal: 'cancelled while no reflector runs' });
    assert.equal((await client.cancel(cancelledId)).cancelled, true);
    const endedId = await client.enqueue({ goal: 'ended as done while no reflector runs' });
    assert.ok(await reflectToHuman(rt, endedId, 'escalate', 'escalation'));
    assert.equal((await client.endAsDone(endedId)).status, 'done');
    const count = async (status: string) =>
      (await rt.metrics.goals.get()).values.find((v) => v.labels.status === status)?.value ?? 0;
    // Too fresh for the sweep: a listening reflector would have them.
    assert.equal((await sweep(rt)).endsCounted, 0);
    const later = Date.now() + 10_000;
    assert.equal((await sweep(rt, later)).endsCounted, 2);
    assert.deepEqual([await count('cancelled'), await count('done')], [1, 1]);
    const cycles = (await rt.metrics.goalCycles.get()).values.find(
      (v) => v.metricName === 'deepq_goal_cycles_count' && v.labels.status === 'done',
    );
    assert.equal(cycles?.value, 1);
    // Once: the next sweep, and the message arriving late, count nothing more.
    assert.equal((await sweep(rt, later)).endsCounted, 0);
    assert.equal(await countCancel(rt, cancelledId), false);
    assert.deepEqual([await count('cancelled'), await count('done')], [1, 1]);
    assert.equal(await redis.client.zcard(rt.goals.keys.uncountedEnds()), 0);
  } finally {
    await client.close();
    await rt.close();
  }
});
