// A goal in its first cycle, as the planner leaves it: moved through planning into running with
// its plan stored, and the cycle's flow dispatched (each subtask in its role's queue, the
// reflection waiting on them). For tests that drive workers, stalls or the reflector by hand.
import assert from 'node:assert/strict';
import { dispatchCycle } from '../services/planner/dispatch.ts';
import { newGoalId } from '../shared/goal/ids.ts';
import type { Plan } from '../shared/goal/plan.ts';
import type { Runtime } from '../shared/runtime/runtime.ts';

export async function dispatchedGoal(rt: Runtime, subtasks: Plan['subtasks'], goal = 'summarise the facts') {
  const goalId = newGoalId();
  await rt.goals.create(goalId, goal, {}, false);
  assert.equal((await rt.lifecycle.planJobStart(goalId, 1))?.moved, true);
  assert.ok(await rt.lifecycle.dispatch(goalId, 1, { subtasks }));
  await dispatchCycle(rt.queues, rt.cfg, goalId, 1, { subtasks });
  return goalId;
}
