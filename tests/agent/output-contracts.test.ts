// A contract's verdict on a broken answer names what is wrong, briefly: it goes back to the model
// in the retry's reminder and, on a second break, into the failure reason.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { critiqueContract } from '../../shared/agent/output-contracts.ts';

test('a critique of 5,000 empty items is rejected in a few lines, not one per item', () => {
  const answer = JSON.stringify(Array.from({ length: 5000 }, () => ({})));
  const verdict = critiqueContract.check(answer);
  assert.equal(verdict.ok, false);
  const problem = verdict.ok ? '' : verdict.problem;
  assert.match(problem, /^critique does not match its schema: 0\.line: /);
  assert.match(problem, /; and 14990 more$/, problem.slice(-200));
  assert.ok(problem.length < 2000, `${problem.length} characters`);
});

test('a critique with a few problems names each of them', () => {
  const verdict = critiqueContract.check('[{"line": "x", "issue": "i", "severity": "low"}, {"line": 2}]');
  const problem = verdict.ok ? '' : verdict.problem;
  assert.match(problem, /0\.line: .*; 1\.issue: .*; 1\.severity: /);
  assert.doesNotMatch(problem, /more$/);
});
