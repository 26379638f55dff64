// A request's page chrome: its CSRF token, and whether signing out means anything.
import type { Context } from 'hono';
import type { UiContext, UiEnv } from './context.ts';
import type { Chrome } from './views/layout.ts';

export function chromeOf(c: Context<UiEnv>, ctx: Pick<UiContext, 'token'>): Chrome {
  return { csrf: c.get('csrf'), signOut: ctx.token !== undefined };
}
