// An action from a decision's button: run it on the goal in the path, then back to the goal's
// page (303). A refusal by deepq's rules (unknown goal, nothing to resume, a call decided
// before) is the user's to read (404/409); anything else (Redis away) is the app's error.
import type { Context } from 'hono';
import { DeepqError, UnknownGoalError, userMessage, ValidationError } from '../../../shared/errors.ts';
import { isGoalId } from '../../../shared/goal/ids.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { formBody } from '../form-body.ts';
import { errorPage } from '../views/error-page.ts';
import { path } from '../views/html.ts';

/**
 * A text field of the posted form, trimmed; empty means absent. Longer than `max` is refused, not
 * cut. A form sends each line break as CRLF where its textarea's maxlength counted one character:
 * counted as the page counts it, a text the page accepted is never refused for its line breaks.
 */
export async function formText(c: Context<UiEnv>, name: string, max: number): Promise<string | undefined> {
  const v = (await formBody(c))[name];
  const text = typeof v === 'string' ? v.replace(/\r\n?/g, '\n').trim() : '';
  if (text.length > max) throw new ValidationError(`the ${name} is ${text.length} characters long: at most ${max}`);
  return text || undefined;
}

export async function act(
  c: Context<UiEnv>,
  ctx: UiContext,
  action: string,
  run: (goalId: string) => Promise<unknown>,
): Promise<Response> {
  const goalId = c.req.param('id') ?? '';
  if (!isGoalId(goalId)) return c.text('unknown goal id\n', 404);
  try {
    await run(goalId);
  } catch (err) {
    if (!(err instanceof DeepqError)) throw err;
    ctx.metrics.actions.inc({ action, outcome: 'refused' });
    ctx.log.info({ goalId, action, reason: err.message }, 'action refused');
    const status = err instanceof UnknownGoalError ? 404 : 409;
    return c.html(errorPage(chromeOf(c, ctx), `${action} refused`, userMessage(err), path`/goals/${goalId}`), status);
  }
  ctx.metrics.actions.inc({ action, outcome: 'ok' });
  ctx.log.info({ goalId, action }, 'action');
  return c.redirect(path`/goals/${goalId}`, 303);
}
