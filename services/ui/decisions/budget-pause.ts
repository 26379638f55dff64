// A goal paused at a budget (`--on-budget pause`): which budget ran out, spent against its
// limit, and a form that raises it with the semantics of `deepq resume <goalId> --max-tokens N`
// (tokens and cycles: a new limit above what is used; seconds: that many more from now). It
// posts to the resume route, which calls GoalClient.resume like the CLI: the goal carries on
// from where it stopped, its parked jobs woken.
import { BUDGET_FLAG, pausedBudgetKind } from '../../../cli/budget-flags.ts';
import type { BudgetKind } from '../../../shared/errors.ts';
import { type GoalRecord, totalTokens } from '../../../shared/goal/store.ts';
import { count } from '../views/format.ts';
import { path } from '../views/html.ts';
import type { DecisionAction, DecisionField, DecisionView } from './types.ts';

const BUDGET_WORD: Record<BudgetKind, string> = { tokens: 'token', steps: 'cycle', seconds: 'time' };

/** Spent against the limit, in the budget's own unit. */
export function spentOf(goal: GoalRecord, kind: BudgetKind, now = Date.now()): string {
  const b = goal.budgets;
  const limit = (n: number | undefined, show: (n: number) => string) => (n === undefined ? 'no limit' : show(n));
  if (kind === 'tokens') return `${count(totalTokens(goal.tokens))} of ${limit(b.maxTokens, count)} tokens used`;
  if (kind === 'steps') return `${goal.step} of ${limit(b.maxSteps, count)} cycles run`;
  const elapsed = ((goal.finishedAt ?? now) - goal.createdAt) / 1000;
  return `${elapsed.toFixed(1)} s of ${limit(b.maxSeconds, String)} s elapsed`;
}

function raiseFields(goal: GoalRecord): DecisionField[] {
  const used = totalTokens(goal.tokens);
  return [
    {
      name: 'maxTokens',
      label: `Max tokens: a new limit above the ${count(used)} used (--max-tokens)`,
      kind: 'number',
      step: '1',
    },
    {
      name: 'maxSteps',
      label: `Max cycles: a new limit above the ${goal.step} run (--max-steps)`,
      kind: 'number',
      step: '1',
    },
    { name: 'maxSeconds', label: 'More seconds, counted from now (--max-seconds)', kind: 'number', step: 'any' },
  ];
}

export function budgetPause(goal: GoalRecord, cancel: DecisionAction, now = Date.now()): DecisionView {
  const kind = pausedBudgetKind(goal);
  const cli = `deepq resume ${goal.goalId} ${BUDGET_FLAG[kind]} N`;
  return {
    id: 'budget-pause',
    kind: 'budget',
    title: `Paused at its ${BUDGET_WORD[kind]} budget: ${spentOf(goal, kind, now)}`,
    detail:
      `${goal.reason ?? 'a budget ran out'}. The work so far is kept: raise the ${BUDGET_WORD[kind]} budget ` +
      `and the goal carries on from where it stopped (what ${cli} does).`,
    actions: [
      {
        label: 'Raise the budget and carry on',
        path: path`/goals/${goal.goalId}/resume?pause=${goal.pauses}`,
        fields: raiseFields(goal),
        tone: 'primary',
      },
      cancel,
    ],
  };
}
