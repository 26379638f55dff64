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
  const pause = pauseLine(g);
  if (pause) lines.push(pause);
  if (g.reason?.startsWith('stalled:'))
    lines.push(`stalled   the reflector stopped asking the model; ${cycleCounts(g)}`);
  return lines;
}

/** A goal awaiting a human: why, and the commands that answer it (none for any other goal). */
export function pauseLine(
  g: Pick<GoalRecord, 'goalId' | 'status' | 'pausedFor' | 'reason' | 'budgets'>,
): string | null {
  if (g.status !== 'awaiting_human') return null;
  const id = g.goalId;
  if (g.pausedFor === 'budget') {
    const flag = BUDGET_FLAG[pausedBudgetKind(g)];
    return `paused    at its budget, work kept: carry on with deepq resume ${id} ${flag} N`;
  }
  const why = g.pausedFor === 'review' ? 'for your review' : 'escalated to you';
  const answers = `deepq resume ${id} goes on (--note "..." re-plans), deepq resume ${id} --end ends it done`;
  return `paused    ${why}: ${answers}, deepq cancel ${id} stops it; deepq artifacts ${id} --out DIR shows its work`;
}

/** `cycles 1: 0 done, 1 failed; 2: …` from the progress record. */
export function cycleCounts(g: Pick<GoalRecord, 'progress'>): string {
  const cycles = g.progress.map(
    (p) => `${p.step}: ${p.done} done${p.failures.length ? `, ${p.failures.length} failed` : ''}`,
  );
  return `cycles ${cycles.join('; ')}`;
}
