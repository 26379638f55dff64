// Per-goal budgets (tokens, steps, seconds): checked before each dispatch and after each
// model call. A goal past a budget ends `budget_exceeded` and keeps its artifacts.
import { z } from 'zod';
import type { UsageSink } from '../agent/middleware/index.ts';
import { BudgetExceededError } from '../errors.ts';
import type { Runtime } from '../runtime/runtime.ts';
import type { GoalRecord } from './store.ts';
import { TOKEN_KINDS, totalTokens } from './store.ts';

/** A goal's limits; each is optional. Set per goal, with defaults from the config. */
export const BudgetsSchema = z.object({
  maxTokens: z.number().int().positive().optional(),
  maxSteps: z.number().int().positive().optional(),
  maxSeconds: z.number().positive().optional(),
});
export type Budgets = z.infer<typeof BudgetsSchema>;

export function budgetProblem(
  goal: GoalRecord,
  opts: { nextStep?: number; now?: number; tokens?: number } = {},
): string | null {
  const b = goal.budgets;
  const tokens = opts.tokens ?? totalTokens(goal.tokens);
  if (b.maxTokens !== undefined && tokens >= b.maxTokens)
    return `token budget exceeded: ${tokens} tokens used (max ${b.maxTokens})`;
  if (b.maxSteps !== undefined && opts.nextStep !== undefined && opts.nextStep > b.maxSteps)
    return `step budget exceeded: step ${opts.nextStep} would pass the limit of ${b.maxSteps}`;
  const elapsed = ((opts.now ?? Date.now()) - goal.createdAt) / 1000;
  if (b.maxSeconds !== undefined && elapsed > b.maxSeconds)
    return `time budget exceeded: ${elapsed.toFixed(1)} s elapsed (max ${b.maxSeconds} s)`;
  return null;
}

/** Token accounting's sink: goal totals per role and model, metrics, then the token budget. */
export function goalUsageSink(rt: Runtime, goal: Pick<GoalRecord, 'goalId' | 'budgets'>): UsageSink {
  return async (ctx, model, usage) => {
    for (const kind of TOKEN_KINDS)
      if (usage[kind]) rt.metrics.llmTokens.inc({ model, role: ctx.role, kind }, usage[kind]);
    const total = await rt.goals.addUsage(goal.goalId, ctx.role, model, usage);
    const max = goal.budgets.maxTokens;
    if (max !== undefined && total >= max)
      throw new BudgetExceededError(`token budget exceeded: ${total} tokens used (max ${max})`);
  };
}
