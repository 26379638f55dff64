// The time budget, enforced mid-cycle: each goal with `maxSeconds` has one delayed job that
// fires when the budget runs out. If the goal is still working, it ends `budget_exceeded` and
// its running jobs are aborted everywhere through the cancel channel (as `deepq cancel` does);
// with `--on-budget pause` it pauses instead, and its running jobs park at their next model
// call (shared/goal/parking.ts), their work kept. A goal awaiting a human is left alone: the
// planner checks the budget when it is resumed.
import { releaseApprovals } from '../../shared/goal/approvals.ts';
import { budgetProblem, onBudgetOf, timeBudgetEnd } from '../../shared/goal/budgets.ts';
import { currentCycle, isTerminal } from '../../shared/goal/status.ts';
import { DEADLINE_MARGIN_MS } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

/** The deadline job came before the budget's end: it waits `waitMs` more, then looks again. */
export class DeadlineEarly extends Error {
  constructor(readonly waitMs: number) {
    super(`not yet: ${waitMs} ms left`);
  }
}

/** Ends or pauses a goal whose time budget ran out; throws DeadlineEarly before its end. */
export async function enforceDeadline(rt: Runtime, goalId: string, now = Date.now()): Promise<string> {
  const goal = await rt.goals.get(goalId);
  if (!goal || isTerminal(goal.status) || goal.status === 'awaiting_human') return `skipped: ${goal?.status ?? 'gone'}`;
  const over = budgetProblem(goal, { now });
  if (!over) {
    // Early (a clock skew between hosts, a job added before a limit was raised): the budget
    // still runs out, and nothing else would notice it mid-cycle.
    const end = timeBudgetEnd(goal);
    if (end === undefined) return 'skipped: no time budget';
    throw new DeadlineEarly(Math.max(0, end - now) + DEADLINE_MARGIN_MS);
  }
  if (onBudgetOf(goal) === 'pause') {
    if (await rt.lifecycle.pauseForBudget(goalId, over, currentCycle(goal)))
      rt.logger.info({ goalId, reason: over.reason }, 'time budget ran out mid-cycle: goal paused');
    return over.reason;
  }
  if (await rt.lifecycle.exceedBudget(goalId, over.reason, goal.step, over.kind)) {
    await rt.redis.publish(rt.goals.keys.cancelChannel(), goalId);
    // Jobs waiting for a human's approval end now, as skipped, not at their approval timeout.
    await releaseApprovals(rt, goalId, 'the goal ran out of time');
    rt.logger.info({ goalId, reason: over.reason }, 'time budget ran out mid-cycle: goal ended');
  }
  return over.reason;
}
