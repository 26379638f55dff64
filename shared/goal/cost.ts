// A goal's estimated cost: its usage per role and model, each model priced by
// shared/agent/providers/prices.ts (the reported id, the id it was requested as, then the id
// without its date). Models with no price are listed, never counted as $0: `deepq status`,
// `deepq goals` and the web inspector say "price unknown".
import { findPrice, type PriceTable, priceUsage } from '../agent/providers/prices.ts';
import type { GoalRecord, Usage } from './store.ts';

export interface CostEstimate {
  /** USD for the priced models. */
  usd: number;
  /** How many models were priced. */
  priced: number;
  /** Models with usage and no price, sorted. */
  unpriced: string[];
}

/** One model's share of a goal: its tokens over every role, and what they cost. */
export interface ModelCost {
  model: string;
  tokens: Usage;
  /** USD at its price; null when the model has no price (never $0). */
  costUsd: number | null;
  /** Some of its tokens were estimated (its endpoint reported no usage). */
  estimated: boolean;
}

type CostedGoal = Pick<GoalRecord, 'usage' | 'requestedAs'> & Partial<Pick<GoalRecord, 'estimatedUsage'>>;

const hasTokens = (u: Usage) => u.input + u.output + u.cache_read + u.cache_write > 0;

/** Usage keys are `<role>|<model>`: each model's tokens summed over its roles, sorted by model. */
export function costPerModel(goal: CostedGoal, prices: PriceTable): ModelCost[] {
  const rows = new Map<string, ModelCost>();
  for (const [key, u] of Object.entries(goal.usage)) {
    const model = key.slice(key.indexOf('|') + 1);
    let row = rows.get(model);
    if (!row) {
      row = { model, tokens: { input: 0, output: 0, cache_read: 0, cache_write: 0 }, costUsd: null, estimated: false };
      rows.set(model, row);
    }
    row.tokens = {
      input: row.tokens.input + u.input,
      output: row.tokens.output + u.output,
      cache_read: row.tokens.cache_read + u.cache_read,
      cache_write: row.tokens.cache_write + u.cache_write,
    };
    row.estimated ||= goal.estimatedUsage?.includes(key) ?? false;
  }
  for (const row of rows.values()) {
    const match = findPrice(prices, row.model, goal.requestedAs?.[row.model]);
    row.costUsd = match ? nanoUsd(priceUsage(match.price, row.tokens)) : null;
  }
  return [...rows.values()].sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
}

/** To the billionth of a dollar (finer than any token's price): `status --json` showed float noise. */
const nanoUsd = (usd: number) => Math.round(usd * 1e9) / 1e9;

export function estimateCost(goal: CostedGoal, prices: PriceTable): CostEstimate {
  return estimateOfRows(costPerModel(goal, prices));
}

/** The goal's estimate from its rows per model (costPerModel). */
export function estimateOfRows(rows: ModelCost[]): CostEstimate {
  const priced = rows.filter((r) => r.costUsd !== null);
  return {
    usd: nanoUsd(priced.reduce((sum, r) => sum + r.costUsd!, 0)),
    priced: priced.length,
    unpriced: rows.filter((r) => r.costUsd === null && hasTokens(r.tokens)).map((r) => r.model),
  };
}

/** One model's cost as `deepq status` shows it: `~$0.0123` or `price unknown`, `(estimated)` if so. */
export function formatModelCost(row: ModelCost): string {
  const cost = row.costUsd === null ? 'price unknown' : `~$${row.costUsd.toFixed(4)}`;
  return row.estimated ? `${cost} (estimated)` : cost;
}

/** `$0.0123`, `price unknown`, or `$0.0123 + price unknown` (with `models`: which ones). */
export function formatCost(c: CostEstimate, opts: { approx?: boolean; models?: boolean } = {}): string {
  const known = `${opts.approx ? '~' : ''}$${c.usd.toFixed(4)}`;
  if (!c.unpriced.length) return known;
  const unknown = `price unknown${opts.models ? ` (${c.unpriced.join(', ')})` : ''}`;
  return c.priced ? `${known} + ${unknown}` : unknown;
}

/** The cost as a number only when every model was priced. */
export function knownCostUsd(c: CostEstimate): number | null {
  return c.unpriced.length ? null : c.usd;
}
