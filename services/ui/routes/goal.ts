// The Goal page, rendered from the goal's hash, its timeline and its artifacts' index.
import type { Hono } from 'hono';
import { formatEventLine } from '../../../cli/timeline.ts';
import { isGoalId } from '../../../shared/goal/ids.ts';
import { goalTraceIds, tracingOn } from '../../../shared/runtime/tracing.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { attachPlans } from '../model/cycle-plans.ts';
import { goalSnapshot } from '../model/goal-snapshot.ts';
import { GoalTimeline } from '../model/goal-timeline.ts';
import { errorPage } from '../views/error-page.ts';
import { type GoalPageData, goalPage } from '../views/goal-page.ts';

/** Lines of recent activity a page starts with (the live log keeps adding). */
export const ACTIVITY_LINES = 60;

export function registerGoalRoute(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/goals/:id', async (c) => {
    const goalId = c.req.param('id');
    const goal = isGoalId(goalId) ? await ctx.client.goals.get(goalId) : null;
    if (!goal) return c.html(errorPage(chromeOf(c, ctx), 'No such goal', `There is no goal ${goalId}.`), 404);
    const entries = await ctx.client.goals.events(goalId, '-', ctx.cfg.eventsMaxLen + 100);
    const timeline = new GoalTimeline();
    for (const { event } of entries) timeline.apply(event);
    const cycles = timeline.all();
    const [snapshot] = await Promise.all([
      goalSnapshot(ctx, goal),
      attachPlans(
        ctx,
        goal,
        timeline,
        cycles.map((x) => x.step),
      ),
    ]);
    // Times count from the goal's creation, whatever entries the timeline still keeps.
    const activity = entries.slice(-ACTIVITY_LINES).map(({ event }) => formatEventLine(event, goal.createdAt, goalId));
    const lastEventId = entries.at(-1)?.id ?? '0-0';
    const trimmed =
      entries.length && entries[0]!.event.type !== 'created'
        ? { firstCycle: cycles[0]?.step, kept: ctx.cfg.eventsMaxLen }
        : undefined;
    const trace = traceOf(ctx, goalId);
    return c.html(goalPage(chromeOf(c, ctx), { goal, snapshot, cycles, lastEventId, activity, trimmed, trace }));
  });
}

/** The goal's trace id, when this inspector traces or knows where traces are shown (`traceUrl`). */
function traceOf(ctx: UiContext, goalId: string): GoalPageData['trace'] {
  if (!tracingOn() && !ctx.cfg.traceUrl) return undefined;
  const { traceId } = goalTraceIds(goalId);
  return { id: traceId, url: ctx.cfg.traceUrl?.replaceAll('{traceId}', traceId) };
}
