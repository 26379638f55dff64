// The Goals page and the enqueue form behind it (GoalClient.enqueue: what `deepq enqueue` does).
import type { Hono } from 'hono';
import { ValidationError } from '../../../shared/errors.ts';
import { GOAL_STATUSES } from '../../../shared/goal/status.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { listGoals } from '../model/goal-list.ts';
import { type EnqueueForm, goalsPage } from '../views/goals-page.ts';
import { path } from '../views/html.ts';

const PAGE_SIZE = 25;

function statusFilter(s: string | undefined): string | undefined {
  return s && (GOAL_STATUSES as readonly string[]).includes(s) ? s : undefined;
}

/** A budget field: empty is no limit; anything else must be a positive number. */
function budget(name: string, raw: string | undefined, integer: boolean): number | undefined {
  if (!raw?.trim()) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new ValidationError(`${name} must be a positive ${integer ? 'whole ' : ''}number`);
  }
  return n;
}

export function registerGoalsRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/', async (c) => {
    const status = statusFilter(c.req.query('status'));
    const page = Math.max(1, Math.min(10_000, Number.parseInt(c.req.query('page') ?? '1', 10) || 1));
    const list = await listGoals(ctx, { status, page, size: PAGE_SIZE });
    return c.html(goalsPage(chromeOf(c, ctx), list, status));
  });

  app.post('/goals', async (c) => {
    const body = await c.req.parseBody();
    const text = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);
    const form: EnqueueForm = {
      goal: text('goal'),
      maxTokens: text('maxTokens'),
      maxSteps: text('maxSteps'),
      maxSeconds: text('maxSeconds'),
      review: text('review') === '1',
    };
    try {
      const budgets = {
        maxTokens: budget('max tokens', form.maxTokens, true),
        maxSteps: budget('max cycles', form.maxSteps, true),
        maxSeconds: budget('max seconds', form.maxSeconds, false),
      };
      const goalId = await ctx.client.enqueue({ goal: form.goal ?? '', budgets, review: form.review });
      ctx.metrics.actions.inc({ action: 'enqueue', outcome: 'ok' });
      ctx.log.info({ goalId, action: 'enqueue' }, 'action');
      return c.redirect(path`/goals/${goalId}`, 303);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      ctx.metrics.actions.inc({ action: 'enqueue', outcome: 'refused' });
      const list = await listGoals(ctx, { page: 1, size: PAGE_SIZE });
      return c.html(goalsPage(chromeOf(c, ctx), list, undefined, { ...form, error: err.message }), 400);
    }
  });
}
