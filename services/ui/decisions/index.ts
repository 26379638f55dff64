// Every kind of decision the Goal page offers, each one provider module: what it lists for a
// goal now, and the POST routes behind its buttons. A new kind is one more module here.
import type { Hono } from 'hono';
import type { GoalRecord } from '../../../shared/goal/store.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { goalControl } from './goal-control.ts';
import { toolApprovals } from './tool-approvals.ts';
import type { DecisionProvider, DecisionView } from './types.ts';

const PROVIDERS: DecisionProvider[] = [toolApprovals, goalControl];

export async function pendingDecisions(ctx: UiContext, goal: GoalRecord): Promise<DecisionView[]> {
  const lists = await Promise.all(PROVIDERS.map((p) => p.pending(ctx, goal)));
  return lists.flat();
}

export function registerDecisionRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  for (const p of PROVIDERS) p.routes(app, ctx);
}
