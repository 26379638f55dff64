// The inspector's reading of the new cycle events, as units: the budget figures its forms
// accept (the CLI's rules), a resume shown with the pause it ends, a partial subtask and its
// token cap, a stall; and a budget pause's decision naming the budget that ran out.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { raisedBudgets } from '../../cli/goal-client.ts';
import { budgetNumber, raiseFromForm } from '../../services/ui/budget-input.ts';
import { budgetPause } from '../../services/ui/decisions/budget-pause.ts';
import { GoalTimeline } from '../../services/ui/model/goal-timeline.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';

test('budget figures: empty is absent, whole numbers for tokens and cycles, positive seconds', () => {
  assert.equal(budgetNumber('max tokens', '', true), undefined);
  assert.equal(budgetNumber('max tokens', '  ', true), undefined);
  assert.equal(budgetNumber('max tokens', undefined, true), undefined);
  assert.equal(budgetNumber('max tokens', ' 1200 ', true), 1200);
  assert.equal(budgetNumber('more seconds', '2.5', false), 2.5);
  for (const bad of ['0', '-3', '1.5', 'abc', '1e400', '99999999999999999999'])
    assert.throws(
      () => budgetNumber('max tokens', bad, true),
      /^ValidationError: max tokens must be a whole number ≥ 1/,
    );
  assert.throws(() => budgetNumber('more seconds', '0', false), /more seconds must be a positive number, not "0"/);
  assert.deepEqual(raiseFromForm({ maxTokens: '9000', maxSteps: '', maxSeconds: '30', note: 'x' }), {
    maxTokens: 9000,
    maxSteps: undefined,
    maxSeconds: 30,
  });
  assert.throws(
    () => raiseFromForm({ maxSteps: 'two' }),
    /max cycles \(--max-steps\) must be a whole number ≥ 1, not "two"/,
  );
});

test('a raise of more than ten years is refused wherever it comes from, as the CLI flag refuses it', () => {
  const g = { step: 1, createdAt: Date.now(), budgets: { maxSeconds: 60 }, tokens: {} } as unknown as GoalRecord;
  const tenYears = 315_360_000;
  assert.equal(raisedBudgets(g, { maxSeconds: tenYears }, g.createdAt).maxSeconds, tenYears);
  const fromForm = raiseFromForm({ maxSeconds: String(tenYears + 1) });
  assert.throws(() => raisedBudgets(g, fromForm), /--max-seconds 315360001 is more than ten years \(315360000\)/);
});

test("a resume raises budgets: a value below the goal's own is refused (a missing zero ended goals early)", () => {
  const createdAt = Date.now() - 20_000;
  const budgets = { maxTokens: 100_000, maxSteps: 50, maxSeconds: 3000 };
  const g = { step: 1, createdAt, budgets, tokens: { total: 500 } } as unknown as GoalRecord;
  assert.throws(() => raisedBudgets(g, { maxTokens: 3000 }), /--max-tokens 3000 is below the goal's budget of 100000/);
  assert.throws(() => raisedBudgets(g, { maxSteps: 3 }), /--max-steps 3 is below the goal's budget of 50 cycles/);
  assert.throws(
    () => raisedBudgets(g, { maxSeconds: 10 }),
    /--max-seconds gives the goal less time than its budget leaves it \(2980 s\)/,
  );
  assert.deepEqual(raisedBudgets(g, { maxTokens: 200_000, maxSteps: 60, maxSeconds: 3000 }, createdAt + 20_000), {
    maxTokens: 200_000,
    maxSteps: 60,
    maxSeconds: 3020,
  });
});

const at = 1_000_000;
const ref = { role: 'research-specialist', threadId: 'goal-tl0000000001--research-specialist-0000abcd' };

test('the timeline: partial subtasks with their caps, parked subtasks, a resume with its pause, a stall', () => {
  const sub = (step: number, artifact: string) => ({ step, index: 0, artifact, ...ref });
  const t = new GoalTimeline();
  const apply = (events: TimelineEvent[]) => events.map((e) => t.apply(e));
  assert.deepEqual(
    apply([
      { type: 'dispatched', at, step: 1, subtasks: [{ index: 0, role: ref.role, artifact: 'a.md' }] },
      { type: 'subtask_started', at, ...sub(1, 'a.md'), attempt: 1 },
      { type: 'subtask_finished', at, ...sub(1, 'a.md'), partial: true, reason: 'cap' },
      {
        type: 'dispatched',
        at,
        step: 2,
        subtasks: [0, 1].map((index) => ({ index, role: ref.role, artifact: 'b.md' })),
      },
      { type: 'subtask_started', at, ...sub(2, 'b.md'), attempt: 1 },
      { type: 'paused', at, step: 2, pausedFor: 'budget', budget: 'tokens', reason: 'token budget exceeded' },
    ]),
    [1, 1, 1, 2, 2, 2],
  );
  t.attachPlan(
    1,
    [{ role: ref.role, instruction: 'x', expected_artifact: 'a.md', read_files: [], token_cap: 2000 }],
    'goal',
  );
  assert.deepEqual([t.get(1)!.subtasks[0]!.state, t.get(1)!.subtasks[0]!.tokenCap], ['partial', 2000]);
  const states = (step: number) => t.get(step)!.subtasks.map((x) => x.state);
  assert.deepEqual(states(2), ['parked', 'parked'], 'running or queued when the budget ran out');
  assert.equal(t.get(2)!.paused!.title, 'Paused at its token budget');
  assert.equal(t.apply({ type: 'resumed', at, step: 2, action: 'raise budget', budgets: { maxTokens: 12_000 } }), 2);
  assert.deepEqual(states(2), ['running', 'queued']);
  assert.deepEqual(t.get(2)!.resumed, { action: 'raise budget', raised: 'max tokens 12,000' });

  // A pause while planning is written at the next cycle, its resume at the goal's current one.
  assert.deepEqual(
    apply([
      { type: 'subtask_finished', at, ...sub(2, 'b.md') },
      { type: 'paused', at, step: 3, pausedFor: 'budget', budget: 'steps', reason: 'step budget exceeded' },
      { type: 'resumed', at, step: 2, action: 'raise budget', budgets: { maxSteps: 3, maxSeconds: 30 } },
      { type: 'stalled', at, step: 3, cycles: 3, action: 'fail', reason: 'stalled: 3 cycles' },
    ]),
    [2, 3, 3, 3],
  );
  assert.equal(t.get(2)!.paused!.title, 'Paused at its token budget', 'cycle 2 keeps its own pause');
  assert.deepEqual(t.get(3)!.paused, {
    pausedFor: 'budget',
    budget: 'steps',
    reason: 'step budget exceeded',
    title: 'Paused at its cycle budget',
  });
  assert.deepEqual(t.get(3)!.resumed, { action: 'raise budget', raised: 'max cycles 3, 30 more seconds' });
  assert.deepEqual(t.get(3)!.stalled, {
    cycles: 3,
    action: 'fail',
    reason: 'stalled: 3 cycles',
    title: 'Stalled: 3 cycles without progress; the goal failed without asking the model',
  });
  // A later pause of the same cycle replaces the resume shown with the earlier one.
  t.apply({ type: 'paused', at, step: 3, pausedFor: 'escalation', reason: 'max depth' });
  assert.equal(t.get(3)!.resumed, undefined);
  assert.equal(t.get(3)!.paused!.title, 'Paused for escalation');
});

test('a budget pause is a decision about the budget that ran out, spent against its limit', () => {
  const goal = {
    goalId: 'g0000000000a',
    status: 'awaiting_human',
    pausedFor: 'budget',
    reason: 'time budget exceeded: 61.2 s elapsed (max 60 s)',
    budgets: { maxSeconds: 60, onBudget: 'pause' },
    tokens: { input: 10, output: 5, cache_read: 0, cache_write: 0 },
    step: 2,
    pauses: 3,
    createdAt: 0,
    finishedAt: null,
  } as unknown as GoalRecord;
  const cancel = { label: 'Cancel goal', path: '/goals/g0000000000a/cancel', tone: 'danger' as const };
  const d = budgetPause(goal, cancel, 90_000);
  assert.equal(d.kind, 'budget');
  assert.equal(d.title, 'Paused at its time budget: 90.0 s of 60 s elapsed');
  assert.match(d.detail!, /what deepq resume g0000000000a --max-seconds N does\)\.$/);
  const raise = d.actions[0]!;
  // It answers this pause only: a page older than a later pause cannot raise that one.
  assert.equal(raise.path, '/goals/g0000000000a/resume?pause=3');
  assert.deepEqual(
    raise.fields!.map((f) => [f.name, f.step, f.label]),
    [
      ['maxTokens', '1', 'Max tokens: a new limit above the 15 used (--max-tokens)'],
      ['maxSteps', '1', 'Max cycles: a new limit above the 2 run (--max-steps)'],
      ['maxSeconds', 'any', 'More seconds, counted from now (--max-seconds)'],
    ],
  );
  assert.equal(d.actions[1], cancel);
});

test('a goal ended mid-cycle shows its open subtasks stopped, no call still waiting', () => {
  const t = new GoalTimeline();
  const sub = (index: number) => ({ step: 1, index, artifact: `${index}.md`, ...ref });
  t.apply({
    type: 'dispatched',
    at,
    step: 1,
    subtasks: [0, 1, 2].map((index) => ({ index, role: ref.role, artifact: `${index}.md` })),
  });
  t.apply({ type: 'subtask_started', at, ...sub(0), attempt: 1 });
  t.apply({ type: 'subtask_finished', at, ...sub(0) });
  t.apply({ type: 'subtask_started', at, ...sub(1), attempt: 1 });
  const call = { ...sub(1), callId: 'ap-1', tool: 'write_file' };
  t.apply({ type: 'approval_requested', at, ...call, input: '{}', expiresAt: at + 60_000 });
  assert.deepEqual(
    t.get(1)!.subtasks.map((s) => s.state),
    ['done', 'awaiting_approval', 'queued'],
  );
  assert.equal(t.apply({ type: 'finished', at, status: 'cancelled', reason: 'cancelled by user' }), 1);
  assert.deepEqual(
    t.get(1)!.subtasks.map((s) => [s.state, s.awaiting ?? []]),
    [
      ['done', []],
      ['stopped', []],
      ['stopped', []],
    ],
  );
  // The call's own cancellation, written after the end, leaves it stopped.
  t.apply({ type: 'approval_decided', at, ...call, decision: 'cancelled' });
  assert.equal(t.get(1)!.subtasks[1]!.state, 'stopped');
  // A goal that ends with nothing open changes no cycle.
  const done = new GoalTimeline();
  done.apply({ type: 'dispatched', at, step: 1, subtasks: [{ index: 0, role: ref.role, artifact: '0.md' }] });
  done.apply({ type: 'subtask_finished', at, ...sub(0) });
  assert.equal(done.apply({ type: 'finished', at, status: 'done' }), undefined);
});

test("a subtask's start after its run was lost is marked restarted until its next attempt", () => {
  const t = new GoalTimeline();
  const sub = { step: 1, index: 0, artifact: 'a.md', ...ref };
  t.apply({ type: 'dispatched', at, step: 1, subtasks: [{ index: 0, role: ref.role, artifact: 'a.md' }] });
  const seen = () => t.get(1)!.subtasks.map((s) => [s.attempt, s.restarted]);
  t.apply({ type: 'subtask_started', at, ...sub, attempt: 1 });
  assert.deepEqual(seen(), [[1, false]]);
  t.apply({ type: 'subtask_started', at, ...sub, attempt: 1, restarted: true });
  assert.deepEqual(seen(), [[1, true]]);
  t.apply({ type: 'subtask_started', at, ...sub, attempt: 2 });
  assert.deepEqual(seen(), [[2, false]]);
});

test('a call approved while the goal waits at its budget leaves the subtask parked until the raise', () => {
  const t = new GoalTimeline();
  const call = { step: 1, index: 0, ...ref, callId: 'ap-1', tool: 'write_file' };
  for (const e of [
    { type: 'dispatched', at, step: 1, subtasks: [{ index: 0, role: ref.role, artifact: 'a.md' }] },
    { type: 'subtask_started', at, step: 1, index: 0, artifact: 'a.md', ...ref, attempt: 1 },
    { type: 'approval_requested', at, ...call, input: '{}', expiresAt: at + 60_000 },
    { type: 'paused', at, step: 1, pausedFor: 'budget', budget: 'seconds', reason: 'time budget exceeded' },
    { type: 'approval_decided', at, ...call, decision: 'approved' },
  ] as TimelineEvent[])
    t.apply(e);
  assert.equal(t.get(1)!.subtasks[0]!.state, 'parked');
  t.apply({ type: 'resumed', at, step: 1, action: 'raise budget', budgets: { maxSeconds: 60 } } as TimelineEvent);
  assert.equal(t.get(1)!.subtasks[0]!.state, 'running');
});
