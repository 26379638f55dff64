// The Goals page and the enqueue form behind it (GoalClient.enqueue: what `deepq enqueue` does).
import type { Hono } from 'hono';
import { ValidationError } from '../../../shared/errors.ts';
import { ON_BUDGET, type OnBudget } from '../../../shared/goal/budgets.ts';
import { GOAL_STATUSES } from '../../../shared/goal/status.ts';
import { budgetNumber } from '../budget-input.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { formBody } from '../form-body.ts';
import { listGoals } from '../model/goal-list.ts';
import { uploadedFiles } from '../upload.ts';
import { type EnqueueForm, goalsPage } from '../views/goals-page.ts';
import { path } from '../views/html.ts';

const PAGE_SIZE = 25;

function statusFilter(s: string | undefined): string | undefined {
  return s && (GOAL_STATUSES as readonly string[]).includes(s) ? s : undefined;
}

/** `--on-budget`: empty keeps the configured default (DEEPQ_ON_BUDGET). */
function onBudget(raw: string | undefined): OnBudget | undefined {
  if (!raw) return undefined;
  if ((ON_BUDGET as readonly string[]).includes(raw)) return raw as OnBudget;
  throw new ValidationError('at a budget: choose "end" or "pause"');
}

export function registerGoalsRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/', async (c) => {
    const status = statusFilter(c.req.query('status'));
    const page = Math.max(1, Math.min(10_000, Number.parseInt(c.req.query('page') ?? '1', 10) || 1));
    const list = await listGoals(ctx, { status, page, size: PAGE_SIZE });
    return c.html(goalsPage(chromeOf(c, ctx), list, status));
  });

  app.post('/goals', async (c) => {
    const body = await formBody(c, { all: true });
    const text = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);
    const form: EnqueueForm = {
      goal: text('goal'),
      maxTokens: text('maxTokens'),
      maxSteps: text('maxSteps'),
      maxSeconds: text('maxSeconds'),
      onBudget: text('onBudget'),
      review: text('review') === '1',
      key: text('key') || undefined,
    };
    try {
      const budgets = {
        maxTokens: budgetNumber('max tokens', form.maxTokens, true),
        maxSteps: budgetNumber('max cycles', form.maxSteps, true),
        maxSeconds: budgetNumber('max seconds', form.maxSeconds, false),
        onBudget: onBudget(form.onBudget),
      };
      const files = await uploadedFiles(body.files, ctx.client.cfg.vfs.maxArtifactBytes);
      const request = { goal: form.goal ?? '', budgets, review: form.review, key: form.key, files };
      const { goalId, created } = await ctx.client.submit(request);
      ctx.metrics.actions.inc({ action: 'enqueue', outcome: created ? 'ok' : 'repeated' });
      ctx.log.info({ goalId, action: 'enqueue', created }, 'action');
      return c.redirect(path`/goals/${goalId}`, 303);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      ctx.metrics.actions.inc({ action: 'enqueue', outcome: 'refused' });
      const list = await listGoals(ctx, { page: 1, size: PAGE_SIZE });
      return c.html(goalsPage(chromeOf(c, ctx), list, undefined, { ...form, key: undefined, error: err.message }), 400);
    }
  });
}
