// DEEPQ_UI_TOKEN: when set, every request needs it, as `Authorization: Bearer <token>` or as
// the session cookie the login form sets. The cookie never holds the token itself: it holds
// when it was issued and an HMAC of that keyed by the token, so any replica can check it,
// changing the token ends every session, and a leaked cookie does not reveal the token.
import { createHmac } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { UiEnv } from '../context.ts';
import { safeEqual } from './safe-equal.ts';
import { clientAddress, type SignInThrottle, tooManyFailures } from './sign-in-throttle.ts';

export const SESSION_COOKIE = 'deepq_ui_session';
export const SESSION_TTL_SECONDS = 12 * 3600;
/** Reachable without the token: the login form itself, its stylesheet, the icon. */
const OPEN_PATHS = new Set(['/login', '/static/ui.css', '/favicon.ico']);

function sign(token: string, issuedAt: number): string {
  return createHmac('sha256', token).update(`deepq-ui-session:${issuedAt}`).digest('hex');
}

export function newSession(token: string, now = Date.now()): string {
  const issuedAt = Math.floor(now / 1000);
  return `${issuedAt}.${sign(token, issuedAt)}`;
}

export function validSession(token: string, value: string | undefined, now = Date.now()): boolean {
  const m = /^(\d{1,12})\.([a-f0-9]{64})$/.exec(value ?? '');
  if (!m) return false;
  const issuedAt = Number(m[1]);
  const age = now / 1000 - issuedAt;
  return age >= -60 && age <= SESSION_TTL_SECONDS && safeEqual(m[2]!, sign(token, issuedAt));
}

function bearerOf(c: Context): string | undefined {
  const auth = c.req.header('authorization');
  return (auth && /^Bearer\s+(.+)$/i.exec(auth)?.[1]?.trim()) || undefined;
}

export function presentsToken(c: Context, token: string): boolean {
  const bearer = bearerOf(c);
  if (bearer) return safeEqual(bearer, token);
  return validSession(token, getCookie(c, SESSION_COOKIE));
}

/**
 * 401 for a request without the token (a browser asking for a page gets the login form with
 * it); nothing to check when no token is set (the inspector is on loopback then). A Bearer
 * token is a guess like a sign-in: wrong ones count against the address, which is refused
 * any (429) once locked out.
 */
export function requireToken(
  token: string | undefined,
  throttle: SignInThrottle,
  loginPage: (c: Context<UiEnv>) => Response | Promise<Response>,
): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    if (!token || OPEN_PATHS.has(c.req.path)) return next();
    if (bearerOf(c)) {
      const address = clientAddress(c);
      // The token is compared first (in memory); a wrong one is counted before any answer.
      const right = presentsToken(c, token);
      const wait = right ? await throttle.lockedFor(address) : await throttle.failed(address);
      if (wait) return tooManyFailures(c, wait);
      if (right) return next();
    } else if (presentsToken(c, token)) return next();
    c.header('www-authenticate', 'Bearer realm="deepq"');
    const wantsPage = c.req.method === 'GET' && (c.req.header('accept') ?? '').includes('text/html');
    return wantsPage ? loginPage(c) : c.text('unauthorized: DEEPQ_UI_TOKEN required\n', 401);
  };
}
