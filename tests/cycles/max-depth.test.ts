// At max depth a reflection that would go on becomes an escalation, and keeps the rest of its
// decision: the artifacts it asked to revise are what the human's resume re-plans.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { atMaxDepth } from '../../services/reflector/reflect-job.ts';

const outcomes = [{ index: 0, status: 'done' as const }];

test('a replan at max depth escalates, keeping its revise list and saying what it would have done', () => {
  const decided = {
    step: 1,
    depth: 1,
    outcomes,
    reflection: { decision: 'replan' as const, reason: 'the notes are too thin', revise: ['notes.md'] },
  };
  const out = atMaxDepth(1, decided);
  assert.ok('reflection' in out);
  assert.equal(out.reflection.decision, 'escalate');
  assert.deepEqual(out.reflection.revise, ['notes.md']);
  assert.match(
    out.reflection.reason,
    /^max depth 1 reached after 1 cycle\(s\): .*would replan: the notes are too thin/,
  );
});

test('an end at max depth stays an end', () => {
  const decided = { step: 1, depth: 1, outcomes, reflection: { decision: 'end' as const, reason: 'met' } };
  assert.deepEqual(atMaxDepth(1, decided), decided);
});
