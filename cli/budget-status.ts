// What `deepq status` says about a goal's cycles and budgets: each budget against its limit
// and what happens at it, a budget pause with the command that carries the goal on, and a
// stall (the reflector stopped asking the model) with how the cycles went. The inspector
// uses the same reading of a budget pause (services/ui/decisions/budget-pause.ts).
import type { GoalRecord } from '../shared/goal/store.ts';
import { totalTokens } from '../shared/goal/store.ts';
import { BUDGET_FLAG, pausedBudgetKind } from './budget-flags.ts';

export function budgetStatusLines(g: GoalRecord, now = Date.now()): string[] {
  const b = g.budgets;
  const seconds = ((g.finishedAt ?? now) - g.createdAt) / 1000;
  const limits = [
    b.maxTokens !== undefined ? `tokens ${totalTokens(g.tokens)} of ${b.maxTokens}` : '',
    b.maxSteps !== undefined ? `cycles ${g.step} of ${b.maxSteps}` : '',
    b.maxSeconds !== undefined ? `seconds ${seconds.toFixed(1)} of ${b.maxSeconds}` : '',
  ].filter(Boolean);
  const lines: string[] = [];
  if (limits.length) lines.push(`budgets   ${limits.join(', ')}; at a limit: ${b.onBudget ?? 'end'}`);
  if (g.status === 'awaiting_human' && g.pausedFor === 'budget') {
    const flag = BUDGET_FLAG[pausedBudgetKind(g)];
    lines.push(`paused    at its budget, work kept: carry on with deepq resume ${g.goalId} ${flag} N`);
  }
  if (g.reason?.startsWith('stalled:'))
    lines.push(`stalled   the reflector stopped asking the model; ${cycleCounts(g)}`);
  return lines;
}

/** `cycles 1: 0 done, 1 failed; 2: …` from the progress record. */
export function cycleCounts(g: Pick<GoalRecord, 'progress'>): string {
  const cycles = g.progress.map(
    (p) => `${p.step}: ${p.done} done${p.failures.length ? `, ${p.failures.length} failed` : ''}`,
  );
  return `cycles ${cycles.join('; ')}`;
}
