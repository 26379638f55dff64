// CSRF protection for every state-changing request, stateless (any replica checks it):
// a random token in an HttpOnly, SameSite=Strict cookie that each form repeats in a hidden
// field (or the x-csrf-token header). Another origin can neither read the cookie nor the
// page, so it cannot repeat the token. On top, a request a browser marks as coming from
// another origin (Origin, Sec-Fetch-Site) is refused outright.
import { randomBytes } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import type { UiEnv } from '../context.ts';
import { safeEqual } from './safe-equal.ts';
import { cookieOptions } from './secure-cookie.ts';

export const CSRF_COOKIE = 'deepq_csrf';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';
const TOKEN_RE = /^[a-f0-9]{64}$/;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Gives the browser a CSRF cookie if it has none, and the token to the request's pages. */
export function csrfCookie(): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    let token = getCookie(c, CSRF_COOKIE);
    if (!token || !TOKEN_RE.test(token)) {
      token = randomBytes(32).toString('hex');
      setCookie(c, CSRF_COOKIE, token, cookieOptions(c));
    }
    c.set('csrf', token);
    await next();
  };
}

/** Why a state-changing request is refused, or null when it may go on. */
export async function csrfProblem(c: Context<UiEnv>): Promise<string | null> {
  const site = c.req.header('sec-fetch-site');
  if (site && site !== 'same-origin' && site !== 'none') return `a ${site} request`;
  const origin = c.req.header('origin');
  // Hosts only: a TLS-terminating proxy changes the scheme the app sees, not the host.
  if (origin && hostOf(origin) !== c.req.header('host')) return 'a request from another origin';
  const sent = c.req.header(CSRF_HEADER) ?? (await formField(c));
  if (!sent) return 'no CSRF token';
  return safeEqual(sent, c.get('csrf')) ? null : 'a wrong CSRF token';
}

/** Refuses state-changing requests without the page's CSRF token (403). */
export function csrfCheck(): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    const problem = await csrfProblem(c);
    if (!problem) return next();
    return c.text(`forbidden: ${problem} (reload the page and try again)\n`, 403);
  };
}

function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

/** The hidden form field; Hono caches the parsed body, so the route reads it again for free. */
async function formField(c: Context): Promise<string | undefined> {
  const type = c.req.header('content-type') ?? '';
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) return undefined;
  const body = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
  const v = body[CSRF_FIELD];
  return typeof v === 'string' ? v : undefined;
}
