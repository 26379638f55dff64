// A goal's estimated cost: its usage per role and model, each model priced by
// shared/agent/providers/prices.ts (the reported id, the id it was requested as, then the id
// without its date). Models with no price are listed, never counted as $0: `deepq status`,
// `deepq goals` and the web inspector say "price unknown".
import { findPrice, type PriceTable, priceUsage } from '../agent/providers/prices.ts';
import type { GoalRecord } from './store.ts';

export interface CostEstimate {
  /** USD for the priced models. */
  usd: number;
  /** How many models were priced. */
  priced: number;
  /** Models with usage and no price, sorted. */
  unpriced: string[];
}

export function estimateCost(goal: Pick<GoalRecord, 'usage' | 'requestedAs'>, prices: PriceTable): CostEstimate {
  let usd = 0;
  const priced = new Set<string>();
  const unpriced = new Set<string>();
  for (const [key, u] of Object.entries(goal.usage)) {
    const model = key.slice(key.indexOf('|') + 1);
    const match = findPrice(prices, model, goal.requestedAs?.[model]);
    if (match) {
      usd += priceUsage(match.price, u);
      priced.add(model);
    } else if (u.input + u.output + u.cache_read + u.cache_write > 0) unpriced.add(model);
  }
  return { usd, priced: priced.size, unpriced: [...unpriced].sort() };
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
