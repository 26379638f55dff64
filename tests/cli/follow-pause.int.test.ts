// `watch` and `enqueue --wait` stop, exit 1, when the goal awaits a human (a review, an
// escalation, a budget pause): it cannot leave that state by itself. Their --help says so.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../shared/runtime/config.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { openState } from '../../shared/runtime/state.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman } from '../../testing/vfs-runtime.ts';

const redis = useRedis();

test('--help of watch and enqueue says they stop when the goal awaits a human', async () => {
  const env = { PATH: process.env.PATH };
  const watch = await runCli(['watch', '--help'], env);
  // Commander wraps the text at 80 columns.
  assert.match(watch.stdout, /until it is terminal or awaits a human;\s+exit 0 only when it\s+is done/);
  const enqueue = await runCli(['enqueue', '--help'], env);
  assert.match(
    enqueue.stdout,
    /--wait\s+wait until the goal is terminal or\s+awaits a human;\s+exit 0 only when it\s+is done/,
  );
});

test('watch on a goal that comes to await a human stops there, exit 1, with the reason', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const enq = await runCli(['enqueue', 'a goal', '--on-budget', 'pause'], env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  const state = openState(loadConfig(env), 'test');
  try {
    const hit = { kind: 'tokens' as const, reason: 'token budget exceeded (stand-in)' };
    assert.ok(await state.lifecycle.pauseForBudget(goalId, hit, 1));
  } finally {
    await state.close();
  }
  const r = await runCli(['watch', goalId], env, 30_000);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /paused for a human \(budget\): token budget exceeded \(stand-in\)/);
});

test('a follow that stops at a review or an escalation names the commands that answer it', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const state = openState(loadConfig(env), 'test');
  try {
    for (const [decision, pausedFor, why] of [
      ['end', 'review', 'for your review'],
      ['escalate', 'escalation', 'escalated to you'],
    ] as const) {
      const enq = await runCli(['enqueue', `a goal for a ${pausedFor}`, '--review'], env);
      const goalId = enq.stdout.trim();
      assert.ok(await reflectToHuman(state as unknown as Runtime, goalId, decision, pausedFor));
      const r = await runCli(['watch', goalId], env, 30_000);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const answers =
        `paused    ${why}: deepq resume ${goalId} goes on (--note "..." re-plans), ` +
        `deepq resume ${goalId} --end ends it done, deepq cancel ${goalId} stops it`;
      assert.ok(r.stdout.includes(answers), r.stdout);
      const status = await runCli(['status', goalId], env);
      assert.ok(status.stdout.includes(answers), status.stdout);
    }
  } finally {
    await state.close();
  }
});
