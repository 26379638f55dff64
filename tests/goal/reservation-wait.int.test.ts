// Parallel calls under a tight token budget: a call refused only because calls in flight hold
// the rest waits for them and then runs (their unspent share comes back); a call that could not
// fit even alone is refused at once; a waiting call stops when its run is cancelled.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GoalClient } from '../../cli/goal-client.ts';
import { BudgetExceededError } from '../../shared/errors.ts';
import { goalCallBudget } from '../../shared/goal/budgets.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsClient, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
let client: GoalClient;
useVfsClient(redis, (x, c) => {
  t = x;
  client = c;
});

const ctx = { role: 'critic', kind: 'subagent' as const, contract: 'md', tier: 'LOW' as const, step: 1 };
const call = (inputChars: number) => ({
  model: 'm',
  max_tokens: 4096,
  system: '',
  messages: [{ role: 'user' as const, content: 'x'.repeat(inputChars) }],
});

async function budgetedGoal(maxTokens: number) {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'tight', { maxTokens }, false);
  return { goalId, budget: goalCallBudget(t.rt, await client.get(goalId)) };
}

test('a call refused only by reservations in flight waits for them, then gets what they gave back', async () => {
  const { goalId, budget } = await budgetedGoal(2000);
  const first = await budget.reserve(call(400), { ...ctx, goalId });
  assert.ok(
    first.maxTokens > 1800 && first.maxTokens < 1900,
    `the first call holds all that is left: ${first.maxTokens}`,
  );
  let settled = false;
  const second = budget.reserve(call(400), { ...ctx, goalId }).finally(() => {
    settled = true;
  });
  await sleep(300);
  assert.equal(settled, false, 'no grant while the first call holds the rest');
  await budget.release(first.member);
  const granted = await second;
  assert.equal(granted.maxTokens, first.maxTokens, 'the same share, given back');
});

test('a call that could not fit even alone is refused at once, not kept waiting', async () => {
  const { goalId, budget } = await budgetedGoal(2000);
  await budget.reserve(call(400), { ...ctx, goalId });
  const refused = await budget.reserve(call(8000), { ...ctx, goalId }).catch((e: unknown) => e);
  assert.ok(refused instanceof BudgetExceededError, String(refused));
  assert.match(refused.message, /token budget exceeded: 0 tokens used and 2000 reserved by calls in flight/);
});

test('a waiting call stops when its run is cancelled, and reserves nothing', async () => {
  const { goalId, budget } = await budgetedGoal(2000);
  const first = await budget.reserve(call(400), { ...ctx, goalId });
  const abort = new AbortController();
  const waiting = budget.reserve(call(400), { ...ctx, goalId, signal: abort.signal });
  await sleep(100);
  abort.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  const held = await t.rt.redis.zrange(t.rt.goals.keys.reservations(goalId), '0', '-1');
  assert.deepEqual(held, [first.member]);
});
