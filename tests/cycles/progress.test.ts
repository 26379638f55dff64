// The stall detector's progress record (shared/goal/progress.ts): one entry per reflected
// cycle, replaced (never duplicated) when a cycle is reflected again, bounded; K cycles in a
// row without progress make a `stalled: …` reason that names what repeated.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type CycleOutcome,
  failureSignature,
  PROGRESS_KEPT,
  planSignature,
  progressEntry,
  recordProgress,
  stallReason,
} from '../../shared/goal/progress.ts';

const plan = (artifact: string, instruction = 'write it') => ({
  subtasks: [{ role: 'research-specialist', instruction, expected_artifact: artifact, read_files: [] }],
});
const failed = (reason: string): CycleOutcome => ({
  index: 0,
  role: 'research-specialist',
  artifact: 'x.md',
  status: 'failed',
  reason,
});
const done: CycleOutcome = { index: 0, role: 'research-specialist', artifact: 'x.md', status: 'done' };

test('an entry counts done subtasks, keeps failures with their numbers masked, and signs the plan', () => {
  const e = progressEntry(2, plan('x.md'), [done, failed('timed out after 3000 ms'), { ...done, status: 'partial' }]);
  assert.equal(e.step, 2);
  assert.equal(e.done, 1, 'a partial subtask is not done');
  assert.deepEqual(e.failures, ['timed out after # ms']);
  assert.equal(e.plan, planSignature(plan('x.md')));
  assert.notEqual(planSignature(plan('x.md')), planSignature(plan('x.md', 'write it better')));
  assert.equal(failureSignature('a\n  b 12'), 'a b #');
});

test('recording a cycle again replaces its entry; the record keeps the last PROGRESS_KEPT cycles', () => {
  let record = recordProgress([], progressEntry(1, plan('a.md'), [failed('boom')]));
  // A re-delivered reflect job records the same cycle again: still one entry.
  record = recordProgress(record, progressEntry(1, plan('a.md'), [failed('boom')]));
  assert.equal(record.length, 1);
  for (let step = 2; step <= PROGRESS_KEPT + 5; step++)
    record = recordProgress(record, progressEntry(step, plan('a.md'), [done]));
  assert.equal(record.length, PROGRESS_KEPT);
  assert.equal(record[0]!.step, 6);
});

test('three cycles without progress stall, naming the repeated failure and plan', () => {
  let record = recordProgress([], progressEntry(1, plan('a.md'), [failed('output broke the contract: empty 1')]));
  assert.equal(stallReason(record, 3), null);
  record = recordProgress(record, progressEntry(2, plan('a.md'), [failed('output broke the contract: empty 2')]));
  assert.equal(stallReason(record, 3), null, 'two cycles are not three');
  record = recordProgress(record, progressEntry(3, plan('a.md'), [failed('output broke the contract: empty 3')]));
  assert.equal(
    stallReason(record, 3),
    'stalled: 3 cycles without progress (cycles 1-3): no subtask finished; ' +
      'the same failure 3×: "output broke the contract: empty #"; the same plan 3×',
  );
  assert.equal(stallReason(record, 0), null, 'cycles 0 turns detection off');
  assert.match(stallReason(record, 2)!, /^stalled: 2 cycles without progress \(cycles 2-3\)/);
});

test('a cycle that finishes something new is progress; repeating the same plan is not', () => {
  const failing = (step: number) => progressEntry(step, plan(`f${step}.md`), [failed(`error in ${'abcdef'[step]}`)]);
  let record = [failing(1), failing(2)];
  record = recordProgress(record, progressEntry(3, plan('new.md'), [done]));
  assert.equal(stallReason(record, 3), null, 'cycle 3 finished new work');
  // The same plan done again and again (churning on one artifact): progress once, then not.
  record = [3, 4, 5].reduce((r, s) => recordProgress(r, progressEntry(s, plan('same.md'), [done])), [failing(2)]);
  assert.equal(stallReason(record, 3), null, 'cycle 3 was the first time');
  record = recordProgress(record, progressEntry(6, plan('same.md'), [done]));
  assert.match(stallReason(record, 3)!, /cycles 4-6\): the same plan 3×$/);
  // Different failures, different plans: still no progress, and the reason says so plainly.
  record = [1, 2, 3].map(failing);
  assert.equal(stallReason(record, 3), 'stalled: 3 cycles without progress (cycles 1-3): no subtask finished');
});

test('the same plan finishing after cycles that finished nothing (caps, a budget pause) is progress', () => {
  const partial: CycleOutcome = { ...done, status: 'partial' };
  let record = [1, 2].map((s) => progressEntry(s, plan('same.md'), [partial]));
  record = recordProgress(record, progressEntry(3, plan('same.md'), [done]));
  assert.equal(stallReason(record, 3), null, 'cycle 3 finished what cycles 1-2 could not');
  record = [1, 2, 3].map((s) => progressEntry(s, plan('same.md'), [partial]));
  assert.match(stallReason(record, 3)!, /no subtask finished; the same plan 3×$/);
});
