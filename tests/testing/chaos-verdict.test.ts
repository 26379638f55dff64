// The chaos run's verdict (what `npm run chaos` exits 1 on): any problem the verifier lists
// fails it, not only lost or duplicated work.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ChaosReport, chaosFailures } from '../../testing/chaos.ts';

function report(over: Partial<ChaosReport> = {}): ChaosReport {
  return {
    goals: 3,
    done: 3,
    lost: 0,
    duplicates: 0,
    replanned: 0,
    kills: 5,
    restarts: 5,
    unexpectedExits: [],
    reExecutions: {
      subtasks: 0,
      jobs: { plan: 0, reflect: 0, subagent: 0 },
      stalled: 0,
      failedJobs: 0,
      redispatches: 0,
    },
    problems: [],
    failures: [],
    wallSeconds: 1,
    settings: {
      goals: 3,
      replicas: 1,
      killEveryMs: 1000,
      latencyMs: 0,
      lockDurationMs: 4000,
      stalledIntervalMs: 1000,
      enqueueSpreadMs: 0,
      timeoutMs: 1000,
      seed: 1,
    },
    ...over,
  };
}

test('a run fails on any problem the verifier lists, not only on lost or duplicated work', () => {
  assert.deepEqual(chaosFailures(report()), []);
  assert.deepEqual(
    chaosFailures(report({ problems: ['goal g: cycle 1 planned 2 times (a concurrent duplicate delivery)'] })),
    ['the verifier found 1 problem(s)'],
  );
  assert.deepEqual(chaosFailures(report({ done: 2, lost: 1, problems: ['goal x: status failed'] })), [
    '1 of 3 goals did not end done',
    '1 goal(s) lost',
    'the verifier found 1 problem(s)',
  ]);
  const exit = { name: 'planner', code: 1, signal: null, tail: '' };
  assert.deepEqual(chaosFailures(report({ unexpectedExits: [exit], duplicates: 2 })), [
    '1 process(es) exited without being killed',
    '2 effect(s) happened twice',
  ]);
  // A job failed for good whose goal still ended done: the stall guard at work, reported only.
  const guard = report({ failures: ['reflect/x: job stalled more than allowable limit'] });
  assert.deepEqual(chaosFailures({ ...guard, reExecutions: { ...guard.reExecutions, failedJobs: 1 } }), []);
});
