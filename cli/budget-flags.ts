// Which budget a goal paused at, and the resume flag that raises it: what the CLI's messages and
// the inspector name. Types only besides: a command module that imports this loads nothing more.
import type { BudgetKind } from '../shared/errors.ts';
import type { GoalRecord } from '../shared/goal/store.ts';

export const BUDGET_FLAG = { tokens: '--max-tokens', steps: '--max-steps', seconds: '--max-seconds' } as const;

/**
 * Which budget a goal paused at: the hash keeps only the reason (the `paused` event has the
 * kind), and every budget reason starts with its kind's word.
 */
export function pausedBudgetKind(g: Pick<GoalRecord, 'reason'>): BudgetKind {
  const word = /^(token|step|time)/.exec(g.reason ?? '')?.[1];
  return word === 'step' ? 'steps' : word === 'time' ? 'seconds' : 'tokens';
}
