// What `deepq status` and `status --json` say about a goal's cost per model: each model's
// tokens (over every role) and its estimated cost, "price unknown" for a model without a
// price (never $0), and the goal's total.
import { costPerModel, estimateOfRows, formatModelCost, knownCostUsd, type ModelCost } from '../shared/goal/cost.ts';
import type { GoalRecord, Usage } from '../shared/goal/store.ts';
import type { Config } from '../shared/runtime/config.ts';
import { safeLine } from './terminal.ts';

type CostedGoal = Pick<GoalRecord, 'usage' | 'requestedAs' | 'estimatedUsage'>;

/** The `usage` field of `status --json`. */
export interface UsageSummary {
  models: ModelCost[];
  total: { tokens: Usage; costUsd: number | null; unpricedModels: string[] };
}

export function usageSummary(g: CostedGoal, prices: Config['prices']): UsageSummary {
  const models = costPerModel(g, prices);
  const tokens: Usage = { input: 0, output: 0, cache_read: 0, cache_write: 0 };
  for (const m of models) for (const k of Object.keys(tokens) as (keyof Usage)[]) tokens[k] += m.tokens[k];
  const c = estimateOfRows(models);
  return { models, total: { tokens, costUsd: knownCostUsd(c), unpricedModels: c.unpriced } };
}

/** One line per model under `cost`, aligned with the per-role token lines (ids escaped before padding). */
export function modelCostLines(g: CostedGoal, prices: Config['prices']): string[] {
  return costPerModel(g, prices).map((m) => `  ${safeLine(m.model).padEnd(44)} ${formatModelCost(m)}`);
}
