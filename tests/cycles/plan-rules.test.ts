// What the planner is told and held to on a later cycle: finished work is named and may not be
// planned again unless the reflection asked to revise it; failures come with their reasons;
// what is left of each budget and each role's cost per subtask are given, and a plan whose
// estimated cost is more than the tokens left is rejected, naming both figures.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { estimatePlan, planContract, planSchemaFor } from '../../services/planner/plan-contract.ts';
import { costPerSubtask, planBudgetOf, plannerMessage, revisable } from '../../services/planner/prompt.ts';
import { reflectorMessage } from '../../services/reflector/prompt.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import type { FileEntry } from '../../shared/vfs/vfs.ts';
import { parseOrThrow } from '../../shared/zod.ts';

const roles = ['research-specialist', 'code-writer', 'critic'];
const task = (artifact: string, over: Record<string, unknown> = {}) => ({
  role: 'research-specialist',
  instruction: `write ${artifact}`,
  expected_artifact: artifact,
  read_files: [],
  ...over,
});

test('a done artifact is not planned again, unless the reflection asked to revise it', () => {
  const schema = planSchemaFor(roles, ['a.md', 'b.md'], { done: ['a.md', 'b.md'], revise: ['b.md'] });
  assert.throws(
    () => parseOrThrow(schema, { subtasks: [task('a.md'), task('c.md')] }, 'plan'),
    /subtasks\.0\.expected_artifact: "a\.md" is done: finished work is kept/,
  );
  // A revision asked for, new work, and reading done work are all fine.
  const ok = parseOrThrow(schema, { subtasks: [task('b.md'), task('c.md', { read_files: ['a.md'] })] }, 'plan');
  assert.equal(ok.subtasks.length, 2);
});

test("the goal's input files are never a subtask's artifact, and a reflection's revise of one is not passed on", () => {
  const schema = planSchemaFor(roles, ['input.md', 'a.md'], { done: ['input.md', 'a.md'], inputs: ['input.md'] });
  assert.throws(
    () => parseOrThrow(schema, { subtasks: [task('input.md')] }, 'plan'),
    /subtasks\.0\.expected_artifact: "input\.md" is one of the files the goal started with: they stay as given/,
  );
  assert.equal(
    parseOrThrow(schema, { subtasks: [task('c.md', { read_files: ['input.md'] })] }, 'plan').subtasks.length,
    1,
  );
  const index: FileEntry[] = [
    { name: 'input.md', status: 'done', step: 0, bytes: 5, version: 1, updatedAt: 0, input: true },
    { name: 'a.md', status: 'done', step: 1, bytes: 10, version: 1, updatedAt: 0 },
  ];
  const asked = goal({ reflection: { decision: 'replan', reason: 'r', step: 1, revise: ['input.md', 'a.md'] } });
  assert.deepEqual(revisable(asked, index), ['a.md']);
  const msg = plannerMessage(asked, 2, index, 1_000_000);
  assert.match(msg, /^To revise \(the reflection asked; each becomes a new version\): a\.md$/m);
  assert.match(msg, /^Not revised \(files the goal started with stay as given\): input\.md$/m);
});

test('a revision that did not finish is told apart from work to plan again: its done version stays', () => {
  const index: FileEntry[] = [
    { name: 'a.md', status: 'done', step: 1, bytes: 10, version: 1, updatedAt: 0 },
    { name: 'b.md', status: 'done', step: 1, bytes: 10, version: 1, updatedAt: 0 },
  ];
  const outcomes = [
    { index: 0, role: 'critic', artifact: 'a.md', status: 'failed' as const, reason: 'the endpoint said 400' },
    { index: 1, role: 'critic', artifact: 'b.md', status: 'partial' as const },
    { index: 2, role: 'critic', artifact: 'c.md', status: 'failed' as const, reason: 'timed out' },
  ];
  const reflection = { decision: 'replan' as const, reason: 'r', step: 1 };
  const msg = plannerMessage(goal({ outcomes, reflection }), 2, index, 1_000_000);
  assert.match(msg, /^- c\.md \(critic\): timed out$/m);
  assert.doesNotMatch(
    msg,
    /^- a\.md \(critic\)/m,
    'a failed revision is not work to plan again: the plan rules refuse it',
  );
  assert.doesNotMatch(msg, /^Partial/m);
  assert.match(
    msg,
    /^Revisions that did not finish \(the done version stays; .*\): a\.md \(critic\), b\.md \(critic\)$/m,
  );
  // Asked to revise again, a.md is work to plan once more.
  const asked = goal({ outcomes, reflection: { ...reflection, revise: ['a.md'] } });
  assert.match(plannerMessage(asked, 2, index, 1_000_000), /^- a\.md \(critic\): the endpoint said 400$/m);
});

test('a token_cap below what one call of the role needs (its prompt, tools, instruction) is refused', () => {
  const schema = planSchemaFor(roles, [], { minCaps: { 'research-specialist': 600 } });
  const instruction = 'x'.repeat(400); // ~100 tokens more, and ~64 for the task message around it
  assert.throws(
    () => parseOrThrow(schema, { subtasks: [task('c.md', { instruction, token_cap: 750 })] }, 'plan'),
    /subtasks\.0\.token_cap: token_cap 750 is below the ~764 tokens one call of research-specialist needs/,
  );
  assert.equal(
    parseOrThrow(schema, { subtasks: [task('c.md', { instruction, token_cap: 764 })] }, 'plan').subtasks.length,
    1,
  );
});

test('a huge role name is refused in a few words, not quoted whole into the reason', () => {
  const schema = planSchemaFor(roles, [], {});
  const plan = { subtasks: [task('c.md', { role: 'r'.repeat(1_000_000) })] };
  const err = (() => {
    try {
      parseOrThrow(schema, plan, 'plan');
    } catch (e) {
      return e as Error;
    }
    return assert.fail('accepted');
  })();
  assert.match(err.message, /subtasks\.0\.role: role names are at most 41 characters/);
  assert.ok(err.message.length < 1000, `a reason of ${err.message.length} chars`);
});

test('a plan estimated above the tokens left is rejected with both figures; within them it passes', () => {
  const budget = { tokensLeft: 5000, perSubtask: { 'research-specialist': 2000 } };
  const contract = planContract(roles, [], { budget });
  const three = JSON.stringify({ subtasks: [task('a.md'), task('b.md'), task('c.md')] });
  const verdict = contract.check(three);
  assert.equal(verdict.ok, false);
  assert.match(
    (verdict as { problem: string }).problem,
    /estimated cost, 6000 tokens \(a\.md ~2000 \(research-specialist's average\), .*\), is more than the 5000 tokens/,
  );
  assert.match(contract.lastOverBudget()!, /6000 tokens/, 'the rejection is known to be the budget alone');
  // Caps that fit make the same fan-out acceptable; a role that never ran is not guessed at.
  const capped = { subtasks: [task('a.md', { token_cap: 1500 }), task('b.md', { token_cap: 1500 }), task('c.md')] };
  assert.deepEqual(estimatePlan(capped, {}), { tokens: 3000, detail: 'a.md ~1500 (its cap), b.md ~1500 (its cap)' });
  assert.equal(contract.check(JSON.stringify({ subtasks: capped.subtasks.slice(0, 2) })).ok, true);
  assert.equal(contract.lastOverBudget(), null);
  // A structural problem is not a budget problem.
  assert.equal(contract.check('{"subtasks": []}').ok, false);
  assert.equal(contract.lastOverBudget(), null);
});

function goal(over: Partial<GoalRecord> = {}): GoalRecord {
  const usage = { input: 0, output: 0, cache_read: 0, cache_write: 0 };
  return {
    goalId: 'g1',
    goal: 'Write five parts',
    status: 'planning',
    step: 1,
    depth: 1,
    createdAt: 1_000_000,
    updatedAt: 0,
    finishedAt: null,
    reason: null,
    review: false,
    budgets: { maxTokens: 20_000, maxSteps: 4, maxSeconds: 600 },
    plan: { subtasks: [task('a.md'), task('b.md')] },
    planStep: 1,
    reflection: { decision: 'replan', reason: 'b.md failed', step: 1, revise: ['a.md'] },
    note: null,
    pausedFor: null,
    pausedFrom: null,
    outcomes: [
      { index: 0, role: 'research-specialist', artifact: 'a.md', status: 'done' },
      { index: 1, role: 'research-specialist', artifact: 'b.md', status: 'failed', reason: 'the summary is empty' },
    ],
    progress: [],
    subtasksByRole: { 'research-specialist': 2 },
    resumes: 0,
    tokens: { ...usage, input: 3000, output: 1000 },
    usage: { 'planner|m': { ...usage, input: 800 }, 'research-specialist|m': { ...usage, input: 2200, output: 1000 } },
    requestedAs: {},
    estimatedUsage: [],
    ...over,
  } as GoalRecord;
}

test("the planner's message names finished work, failures with reasons, revisions, budgets left and costs", () => {
  const index: FileEntry[] = [{ name: 'a.md', status: 'done', step: 1, bytes: 10, version: 1, updatedAt: 0 }];
  const msg = plannerMessage(goal(), 2, index, 1_000_000 + 100_000);
  assert.match(msg, /^- a\.md \[done, 10 bytes\]$/m);
  assert.match(msg, /^Finished work \(marked done above\): keep it, do not plan it again\.$/m);
  assert.doesNotMatch(msg, /a\.md \(v1\)/, 'done names are listed once, in the index');
  assert.match(msg, /^- b\.md \(research-specialist\): the summary is empty$/m);
  assert.match(msg, /^To revise \(the reflection asked; each becomes a new version\): a\.md$/m);
  assert.match(msg, /^Budget left: tokens 16000 of 20000; cycles: this is cycle 2 of at most 4; seconds 500 of 600$/m);
  assert.match(msg, /^Cost per subtask so far: research-specialist ~1600 tokens \(2 subtasks\)$/m);
  assert.deepEqual(
    costPerSubtask(goal()),
    { 'research-specialist': 1600 },
    "the planner's own tokens are not a role's",
  );
  assert.deepEqual(planBudgetOf(goal({ budgets: {} })), undefined, 'no token budget: nothing to estimate against');
});

test('the reflector is told what is left of each budget too: tokens, seconds and cycles', () => {
  const msg = reflectorMessage(goal(), 2, [], [], 1_000_000 + 100_000);
  assert.match(msg, /^Budget left: tokens 16000 of 20000; seconds 500 of 600$/m);
  assert.match(msg, /^Step budget: cycle 2 of at most 4$/m);
  assert.doesNotMatch(reflectorMessage(goal({ budgets: {} }), 2, [], []), /Budget left|Step budget/);
});
