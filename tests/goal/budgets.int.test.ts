// Per-goal budgets (tokens, steps, seconds), from `deepq enqueue` flags: checked before each
// dispatch and after each model call; a goal past one ends budget_exceeded with artifacts kept.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Fleet, metricSum, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let fleet: Fleet;
before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '150' });
});
after(async () => fleet?.stop());

async function enqueue(args: string[]) {
  const r = await runCli(['enqueue', 'Budgeted goal', '--wait', '--json', ...args], fleet.env);
  const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return { r, summary, goal: await fleet.client.get(summary.goalId) };
}

test('--max-steps 1: the second cycle is never dispatched; cycle 1 artifacts stay', async () => {
  const { r, summary, goal } = await enqueue(['--max-steps', '1']);
  assert.equal(r.code, 1, 'enqueue --wait exits non-zero unless the goal is done');
  assert.equal(summary.status, 'budget_exceeded');
  assert.match(goal.reason!, /step budget exceeded: step 2 would pass the limit of 1/);
  assert.equal(goal.step, 1);
  assert.deepEqual([...summary.artifacts].sort(), ['research.md', 'solution.py']);
  assert.equal(await metricSum(fleet, 'deepq_budget_events_total', { kind: 'steps', action: 'end' }), 1);
});

test('--max-tokens: the goal stops at the first model call whose reservation does not fit', async () => {
  const { summary, goal } = await enqueue(['--max-tokens', '1500']);
  assert.equal(summary.status, 'budget_exceeded');
  assert.match(
    goal.reason!,
    /token budget exceeded: \d+ tokens used.* \(the next call needs about \d+ input and \d+ output\), too few left/,
  );
  assert.match(goal.reason!, /, too few left for another call \(max 1500\)$/);
  const used = goal.tokens.input + goal.tokens.output;
  // Each call reserved its tokens first: the goal stopped below its budget, not past it.
  assert.ok(used > 0 && used <= 1500, `recorded ${used} tokens`);
  assert.equal(await metricSum(fleet, 'deepq_budget_events_total', { kind: 'tokens', action: 'end' }), 1);
});

test('--max-tokens that covers the goal: parallel subagents wait for reserved tokens, the goal is done', async () => {
  // The goal spends about 2,200 tokens; each subagent call asks for 4,096 output tokens, so the
  // first to reserve holds all that is left until it ends: the others wait for it, not give up.
  const { summary, goal } = await enqueue(['--max-tokens', '4000']);
  assert.equal(summary.status, 'done', goal.reason ?? undefined);
  const used = goal.tokens.input + goal.tokens.output;
  assert.ok(used > 1000 && used <= 4000, `recorded ${used} tokens`);
  assert.equal(goal.step, 2);
});

test('--max-seconds: a goal past its wall-clock budget ends at the next check', async () => {
  const slow = await startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '1500' });
  try {
    const r = await runCli(['enqueue', 'Slow goal', '--wait', '--json', '--max-seconds', '1'], slow.env);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(summary.status, 'budget_exceeded');
    assert.match((await slow.client.get(summary.goalId)).reason!, /time budget exceeded/);
  } finally {
    await slow.stop();
  }
});

test('budget flags reject nonsense with a clear error', async () => {
  const r = await runCli(['enqueue', 'x', '--max-tokens', 'lots'], fleet.env);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /--max-tokens must be an integer/);
});
