// Sign in and out (only with DEEPQ_UI_TOKEN set): the token once, then an HttpOnly session
// cookie. A request that needs the token and lacks it gets this form with a 401.
import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { formBody } from '../form-body.ts';
import { SESSION_COOKIE, SESSION_TTL_SECONDS } from '../security/auth.ts';
import { safeEqual } from '../security/safe-equal.ts';
import { cookieOptions } from '../security/secure-cookie.ts';
import { clientAddress } from '../security/sign-in-throttle.ts';
import { loginPage } from '../views/login-page.ts';

/** Where to go after signing in: a path of this app only (never `//host` or a scheme). */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string' || !/^\/(?![/\\])[\x21-\x7e]*$/.test(next)) return '/';
  return next;
}

/** The 401 answer to a browser that asked for a page without the token. */
export function loginRequired(c: Context<UiEnv>, ctx: UiContext): Response | Promise<Response> {
  const url = new URL(c.req.url);
  if (c.req.method === 'GET') return c.html(loginPage(chromeOf(c, ctx), safeNext(url.pathname + url.search)), 401);
  // A form sent once the session had ended: back to the page it came from, once signed in.
  const page = /^\/goals\/[^/]+/.exec(url.pathname)?.[0] ?? '/';
  const error = 'Your session has ended: sign in again, then repeat what you did (it was not done).';
  return c.html(loginPage(chromeOf(c, ctx), safeNext(page), error), 401);
}

export function registerLoginRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/login', (c) => {
    if (!ctx.token) return c.redirect('/', 303);
    return c.html(loginPage(chromeOf(c, ctx), safeNext(c.req.query('next'))));
  });
  app.post('/login', async (c) => {
    const body = await formBody(c);
    const next = safeNext(body.next);
    if (!ctx.token || !ctx.sessions) return c.redirect(next, 303);
    const address = clientAddress(c);
    const right = typeof body.token === 'string' && safeEqual(body.token, ctx.token);
    const wait = right ? await ctx.signIn.lockedFor(address) : await ctx.signIn.failed(address);
    if (wait) {
      c.header('retry-after', String(wait));
      const error = `Too many wrong tokens from this address: try again in ${wait} s.`;
      return c.html(loginPage(chromeOf(c, ctx), next, error), 429);
    }
    if (!right) {
      ctx.log.warn({ path: '/login', address }, 'sign-in refused: wrong token');
      return c.html(loginPage(chromeOf(c, ctx), next, 'That is not the token.'), 401);
    }
    setCookie(c, SESSION_COOKIE, ctx.sessions.issue(), cookieOptions(c, SESSION_TTL_SECONDS));
    return c.redirect(next, 303);
  });
  app.post('/logout', async (c) => {
    // Ended in Redis, not only in this browser: a copy of the cookie no longer signs in either.
    await ctx.sessions?.end(getCookie(c, SESSION_COOKIE));
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return c.redirect(ctx.token ? '/login' : '/', 303);
  });
}
