// The Goals table: newest first from the goals index, one page at a time. Without a status
// filter a page is one range of the index; with one, the index is read in chunks until the
// page is full (the index holds what retention keeps: a day's goals by default).
import { estimateCost, formatCost } from '../../../shared/goal/cost.ts';
import { type GoalRecord, totalTokens } from '../../../shared/goal/store.ts';
import type { UiContext } from '../context.ts';

export interface GoalRow {
  goalId: string;
  text: string;
  status: string;
  cycles: number;
  tokens: number;
  /** `$0.0123`, or `price unknown` for models without a price. */
  cost: string;
  createdAt: number;
}

export interface GoalPage {
  rows: GoalRow[];
  page: number;
  hasNext: boolean;
}

const CHUNK = 200;

function row(ctx: UiContext, g: GoalRecord): GoalRow {
  return {
    goalId: g.goalId,
    text: g.goal.slice(0, 160),
    status: g.status,
    cycles: g.step,
    tokens: totalTokens(g.tokens),
    cost: formatCost(estimateCost(g, ctx.cfg.prices)),
    createdAt: g.createdAt,
  };
}

async function records(ctx: UiContext, ids: string[]): Promise<GoalRecord[]> {
  const all = await Promise.all(ids.map((id) => ctx.client.goals.get(id)));
  // An id whose goal was swept between the two reads is simply not shown.
  return all.filter((g): g is GoalRecord => g !== null);
}

export async function listGoals(
  ctx: UiContext,
  opts: { status?: string; page: number; size: number },
): Promise<GoalPage> {
  const index = ctx.client.goals.keys.goalsIndex();
  const skip = (opts.page - 1) * opts.size;
  // One more than a page, to know whether there is a next one.
  const chunk = opts.status ? CHUNK : opts.size + 1;
  const wanted: GoalRecord[] = [];
  let matched = 0;
  for (let start = opts.status ? 0 : skip; wanted.length <= opts.size; start += chunk) {
    const ids = await ctx.client.redis.zrevrange(index, start, start + chunk - 1);
    for (const g of await records(ctx, ids)) {
      if (opts.status && (g.status !== opts.status || matched++ < skip)) continue;
      wanted.push(g);
    }
    if (ids.length < chunk) break;
  }
  return {
    rows: wanted.slice(0, opts.size).map((g) => row(ctx, g)),
    page: opts.page,
    hasNext: wanted.length > opts.size,
  };
}
