// The chaos verifier's timeline rules, on hand-written timelines: what a done goal's events
// must show (a reflection per cycle, an end per subtask, nothing twice), and which repeats
// at-least-once delivery makes legitimate.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TimelineEvent, TimelineEventBody } from '../../shared/goal/events.ts';
import { checkTimeline } from '../../testing/chaos.ts';

const at = (e: TimelineEventBody): TimelineEvent => ({ ...e, at: 0 }) as TimelineEvent;
const research = { index: 0, role: 'research-specialist', artifact: 'research.md' };
const code = { index: 1, role: 'code-writer', artifact: 'solution.py' };
const critic = { index: 0, role: 'critic', artifact: 'critique.json' };

const started = (step: number, ref: typeof research, threadId: string, restarted?: true) =>
  at({ type: 'subtask_started', step, ...ref, threadId, attempt: 1, ...(restarted ? { restarted } : {}) });
const ended = (step: number, ref: typeof research, threadId?: string, type = 'subtask_finished' as const) =>
  at({ type, step, ...ref, ...(threadId ? { threadId } : {}) });
const reflected = (step: number, statuses: ('done' | 'failed' | 'partial')[], decision = 'continue' as const) =>
  at({
    type: 'reflected',
    step,
    decision,
    reason: 'r',
    outcomes: statuses.map((status, index) => ({ index, status })),
  });

/** The scripted model's two cycles, as a done goal's timeline shows them. */
function doneGoal(): TimelineEvent[] {
  return [
    at({ type: 'created', goal: 'g' }),
    at({ type: 'planned', step: 1, threadId: 'p1', subtasks: [] }),
    at({ type: 'dispatched', step: 1, subtasks: [research, code] }),
    started(1, research, 'a'),
    started(1, code, 'b'),
    ended(1, research, 'a'),
    ended(1, code, 'b'),
    reflected(1, ['done', 'done']),
    at({ type: 'planned', step: 2, threadId: 'p2', subtasks: [] }),
    at({ type: 'dispatched', step: 2, subtasks: [critic] }),
    started(2, critic, 'c'),
    ended(2, critic, 'c'),
    reflected(2, ['done'], 'end' as never),
    at({ type: 'finished', status: 'done', step: 2 }),
  ];
}

const without = (events: TimelineEvent[], drop: (e: TimelineEvent) => boolean) => events.filter((e) => !drop(e));
const insertAfter = (events: TimelineEvent[], i: number, ...more: TimelineEvent[]) => [
  ...events.slice(0, i + 1),
  ...more,
  ...events.slice(i + 1),
];
const indexOf = (events: TimelineEvent[], pred: (e: TimelineEvent) => boolean) => events.findIndex(pred);

test('a done goal whose timeline is complete passes', () => {
  const c = checkTimeline('g', 'done', doneGoal());
  assert.deepEqual(c.problems, []);
  assert.equal(c.duplicates, 0);
  assert.equal(c.subtaskReruns, 0);
});

test("a done goal without step 1's reflected event is reported", () => {
  const events = without(doneGoal(), (e) => e.type === 'reflected' && e.step === 1);
  const c = checkTimeline('g', 'done', events);
  assert.deepEqual(c.problems, ['goal g: cycle 1 was dispatched but never reflected on']);
});

test('a cycle reflected twice is a duplicate', () => {
  const events = doneGoal();
  const c = checkTimeline('g', 'done', insertAfter(events, 7, reflected(1, ['done', 'done'])));
  assert.deepEqual(c.problems, ['goal g: cycle 1 reflected 2 times']);
  assert.equal(c.duplicates, 1);
});

test("a failed goal's earlier cycle must be reflected on; its last need not be", () => {
  const failed = (events: TimelineEvent[]) => [
    ...without(events, (e) => e.type === 'finished' || (e.type === 'reflected' && e.step === 2)),
    at({ type: 'finished', status: 'failed', step: 2, reason: 'reflection failed' }),
  ];
  assert.deepEqual(checkTimeline('g', 'failed', failed(doneGoal())).problems, []);
  const noFirst = failed(without(doneGoal(), (e) => e.type === 'reflected' && e.step === 1));
  assert.deepEqual(checkTimeline('g', 'failed', noFirst).problems, [
    'goal g: cycle 1 was dispatched but never reflected on',
  ]);
});

test('a cancelled goal with a subtask that never ran passes the timeline check', () => {
  const events = [
    at({ type: 'created', goal: 'g' }),
    at({ type: 'planned', step: 1, threadId: 'p1', subtasks: [] }),
    at({ type: 'dispatched', step: 1, subtasks: [research, code] }),
    started(1, research, 'a'),
    at({ type: 'finished', status: 'cancelled', step: 1 }),
  ];
  assert.deepEqual(checkTimeline('g', 'cancelled', events).problems, []);
});

test('a subtask of a reflected cycle that never ended is reported, unless its reflection saw it fail', () => {
  const events = without(doneGoal(), (e) => e.type === 'subtask_finished' && e.step === 1 && e.index === 0);
  assert.deepEqual(checkTimeline('g', 'done', events).problems, [
    'goal g: subtask 1:0 (research.md) never ended (no subtask_finished or subtask_failed; outcome done)',
  ]);
  // Failed for good, its process dead before the failure was recorded: the reflection has it.
  const failedForGood = events.map((e) =>
    e.type === 'reflected' && e.step === 1 ? reflected(1, ['failed', 'done']) : e,
  );
  assert.deepEqual(checkTimeline('g', 'done', failedForGood).problems, []);
});

test('a run that ended twice is a duplicate; one that ended without starting is reported', () => {
  const events = doneGoal();
  const i = indexOf(events, (e) => e.type === 'subtask_finished' && e.step === 1 && e.index === 0);
  const twice = checkTimeline('g', 'done', insertAfter(events, i, ended(1, research, 'a')));
  assert.deepEqual(twice.problems, ['goal g: subtask 1:0 run a ended 2 times']);
  assert.equal(twice.duplicates, 1);
  const stray = checkTimeline('g', 'done', insertAfter(events, i, ended(1, research, 'zz')));
  assert.deepEqual(stray.problems, ['goal g: subtask 1:0 run zz ended but never started']);
  assert.equal(stray.duplicates, 0);
});

test('a run started twice (one run, two events) is a duplicate', () => {
  const events = doneGoal();
  const i = indexOf(events, (e) => e.type === 'subtask_started' && e.step === 1 && e.index === 1);
  const c = checkTimeline('g', 'done', insertAfter(events, i, started(1, code, 'b')));
  assert.deepEqual(c.problems, ['goal g: subtask 1:1 run b started twice']);
  assert.equal(c.duplicates, 1);
});

test('a run going on after its process died (a restarted start of its thread) is no duplicate', () => {
  const events = doneGoal();
  const i = indexOf(events, (e) => e.type === 'subtask_started' && e.step === 1 && e.index === 1);
  const c = checkTimeline('g', 'done', insertAfter(events, i, started(1, code, 'b', true)));
  assert.deepEqual(c.problems, []);
  assert.equal(c.subtaskReruns, 1);
});

test('at-least-once repeats pass: a re-run after a recorded end, then a failure for good; a partial end', () => {
  const events = doneGoal();
  const i = indexOf(events, (e) => e.type === 'subtask_finished' && e.step === 1 && e.index === 0);
  // The run recorded its end and died before its job was acked: the job ran again, and then
  // (its process killed twice more) failed for good, recorded without a thread.
  const rerun = insertAfter(
    events,
    i,
    started(1, research, 'a2'),
    ended(1, research, 'a2'),
    started(1, research, 'a3'),
    ended(1, research, undefined, 'subtask_failed' as never),
  );
  const c = checkTimeline('g', 'done', rerun);
  assert.deepEqual(c.problems, []);
  assert.equal(c.subtaskReruns, 2);
  assert.equal(c.duplicates, 0);
  // A run stopped at its token cap ends with a partial subtask_finished.
  const partial = events.map((e) =>
    e.type === 'subtask_finished' && e.step === 2 ? at({ ...e, partial: true } as TimelineEventBody) : e,
  );
  assert.deepEqual(checkTimeline('g', 'done', partial).problems, []);
});

test('two failures for good of one subtask are a duplicate', () => {
  const events = doneGoal();
  const i = indexOf(events, (e) => e.type === 'subtask_finished' && e.step === 2);
  const failure = ended(2, critic, undefined, 'subtask_failed' as never);
  const c = checkTimeline('g', 'done', insertAfter(events, i, failure, failure));
  assert.deepEqual(c.problems, ['goal g: subtask 2:0 was recorded failed for good 2 times']);
  assert.equal(c.duplicates, 1);
});

test('a done goal without a finished event, or with two, is reported', () => {
  const none = checkTimeline(
    'g',
    'done',
    without(doneGoal(), (e) => e.type === 'finished'),
  );
  assert.deepEqual(none.problems, ['goal g: 0 finished events']);
  const two = checkTimeline('g', 'done', [...doneGoal(), at({ type: 'finished', status: 'done', step: 2 })]);
  assert.deepEqual(two.problems, ['goal g: 2 finished events']);
  assert.equal(two.duplicates, 1);
});
