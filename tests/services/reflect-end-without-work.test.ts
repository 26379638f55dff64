// The reflector's `end` on a cycle that made nothing becomes an escalation: a goal never ends
// `done` with no result of its own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { endWithoutWork } from '../../services/reflector/reflect-job.ts';
import type { Reflection } from '../../shared/goal/plan.ts';

const END = { decision: 'end', reason: 'nothing more to do' } as Reflection;
const ended = (r: Reflection) => r.decision === 'end';

test('a finished subtask, a partial one that wrote, or a done artifact of its own lets the goal end', () => {
  assert.ok(ended(endWithoutWork(END, [{ status: 'done' }], [])));
  assert.ok(ended(endWithoutWork(END, [{ status: 'partial', bytes: 120 }], [])));
  assert.ok(ended(endWithoutWork(END, [{ status: 'failed' }], [{ status: 'done' }])));
});

test('a partial subtask that wrote nothing, or only the user input files, is nothing made: escalated', () => {
  // Stopped at its token cap after tool calls only: no text, no working copy.
  const partial = endWithoutWork(END, [{ status: 'partial' }, { status: 'partial', bytes: 0 }], []);
  assert.equal(partial.decision, 'escalate');
  assert.match(partial.reason, /^no subtask finished and no artifact is done: a human must decide/);
  const inputsOnly = endWithoutWork(END, [{ status: 'failed' }], [{ status: 'done', input: true }]);
  assert.equal(inputsOnly.decision, 'escalate');
});
