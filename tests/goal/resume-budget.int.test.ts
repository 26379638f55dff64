// A resume after an escalation or a review starts a new cycle: one the goal's budgets would
// refuse is refused up front, naming the flag that raises it, and the goal stays with the human.
// (Accepted, the planner ended it budget_exceeded at once: the human's own resume lost the goal.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalClient } from '../../cli/goal-client.ts';
import { BudgetExceededError } from '../../shared/errors.ts';
import { type Budgets, goalCallBudget } from '../../shared/goal/budgets.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsClient, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
let client: GoalClient;
useVfsClient(redis, (x, c) => {
  t = x;
  client = c;
});

/** A goal escalated by its reflector at cycle 1, through the real transitions. */
async function escalated(budgets: Budgets): Promise<string> {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'escalated', budgets, false);
  assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
  return goalId;
}

test('a resume whose next cycle passes --max-steps is refused, and goes through once it is raised', async () => {
  const goalId = await escalated({ maxSteps: 1 });
  await assert.rejects(client.resume(goalId), /still out of budget \(step budget.*raise it with --max-steps/);
  await assert.rejects(client.resume(goalId, { note: 'try harder' }), /--max-steps/);
  const g = await client.get(goalId);
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.resumes, 0);
  assert.deepEqual(await client.resume(goalId, { raise: { maxSteps: 2 } }), { status: 'queued', action: 'replan' });
});

test('a resume past --max-seconds is refused; --max-seconds gives time from now', async () => {
  const goalId = await escalated({ maxSeconds: 1 });
  await new Promise((r) => setTimeout(r, 1100));
  await assert.rejects(client.resume(goalId), /time budget exceeded.*raise it with --max-seconds/);
  assert.equal((await client.get(goalId)).status, 'awaiting_human');
  assert.equal((await client.resume(goalId, { raise: { maxSeconds: 60 } })).status, 'queued');
});

test('a --max-tokens too close to what is used for any model call is refused, naming the minimum', async () => {
  const goalId = await escalated({ maxTokens: 50 });
  await assert.rejects(
    client.resume(goalId, { raise: { maxTokens: 100 } }),
    /--max-tokens 100 leaves 100 tokens above the 0 used: a model call needs at least 128/,
  );
  assert.equal((await client.get(goalId)).status, 'awaiting_human');
  assert.deepEqual(await client.resume(goalId, { raise: { maxTokens: 128 } }), { status: 'queued', action: 'replan' });
});

test('at a token pause, a raise leaving too little for the paused call is refused, naming its need', async () => {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'a long prompt', { maxTokens: 1000, onBudget: 'pause' }, false);
  // The call a run was about to make: 3000 tokens of input do not fit the 1000 of the budget.
  const budget = goalCallBudget(t.rt, await client.get(goalId));
  const req = {
    model: 'm',
    max_tokens: 500,
    system: '',
    messages: [{ role: 'user' as const, content: 'x'.repeat(12_000) }],
  };
  const ctx = { role: 'critic', kind: 'subagent' as const, contract: 'md', tier: 'LOW' as const, goalId, step: 1 };
  const refused = await budget.reserve(req, ctx).catch((e: unknown) => e);
  assert.ok(refused instanceof BudgetExceededError, String(refused));
  assert.ok(refused.need && refused.need > 3000, `need: ${refused.need}`);
  assert.ok(
    await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: refused.message, need: refused.need }, 0),
  );
  assert.equal((await client.get(goalId)).pausedNeed, refused.need);

  const short = refused.need - 1;
  await assert.rejects(
    client.resume(goalId, { raise: { maxTokens: short } }),
    new RegExp(
      `--max-tokens ${short} leaves ${short} tokens .* the call the goal paused at needs about ${refused.need}`,
    ),
  );
  assert.equal((await client.get(goalId)).status, 'awaiting_human');
  assert.equal((await client.resume(goalId, { raise: { maxTokens: refused.need } })).action, 'raise budget');
  assert.equal((await client.get(goalId)).pausedNeed, null, 'the pause is over: its need with it');
  // Reserved now: the raise left the call room.
  assert.ok((await budget.reserve(req, ctx)).maxTokens > 0);
});
