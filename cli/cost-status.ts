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

/** A usage key (`role|model`) as `status` shows it, escaped. */
export const usageLabel = (key: string): string => safeLine(key.replace('|', ' @ '));

/**
 * Where `status` starts the counts after a `role @ model` and the cost after a model id: column 44,
 * or past the longest of them, so that one long model id does not push its own row out of line.
 */
export function usageColumnWidth(g: Pick<GoalRecord, 'usage'>): number {
  const keys = Object.keys(g.usage);
  const labels = [...keys.map(usageLabel), ...keys.map((k) => safeLine(k.slice(k.indexOf('|') + 1)))];
  return Math.max(44, ...labels.map((l) => l.length + 1));
}

/** One line per model under `cost`, aligned with the per-role token lines (ids escaped before padding). */
export function modelCostLines(g: CostedGoal, prices: Config['prices'], width = usageColumnWidth(g)): string[] {
  return costPerModel(g, prices).map((m) => `  ${safeLine(m.model).padEnd(width)} ${formatModelCost(m)}`);
}
