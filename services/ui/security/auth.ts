// DEEPQ_UI_TOKEN: when set, every request needs it, as `Authorization: Bearer <token>` or as
// the session cookie the login form sets. The cookie never holds the token itself: it holds
// when it was issued, a random session id and an HMAC of both keyed by the token, so any
// replica can check it, changing the token ends every session, and a leaked cookie does not
// reveal the token. Signing out ends the session for good: its id is kept in Redis as signed out
// (every replica sees it) until the session would have expired.
import { createHmac, randomBytes } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { Redis } from 'ioredis';
import type { UiEnv } from '../context.ts';
import { safeEqual } from './safe-equal.ts';
import { clientAddress, type SignInThrottle, tooManyFailures } from './sign-in-throttle.ts';

export const SESSION_COOKIE = 'deepq_ui_session';
export const SESSION_TTL_SECONDS = 12 * 3600;
/** Reachable without the token: the login form itself, its stylesheet, the icon. */
const OPEN_PATHS = new Set(['/login', '/static/ui.css', '/favicon.ico']);

function sign(token: string, issuedAt: number, id: string): string {
  return createHmac('sha256', token).update(`deepq-ui-session:${issuedAt}:${id}`).digest('hex');
}

/** A signed session cookie's parts, or null for one not signed with `token` or out of date. */
function sessionOf(token: string, value: string | undefined, now = Date.now()): { id: string; left: number } | null {
  const m = /^(\d{1,12})\.([a-f0-9]{32})\.([a-f0-9]{64})$/.exec(value ?? '');
  if (!m) return null;
  const issuedAt = Number(m[1]);
  const age = now / 1000 - issuedAt;
  const valid = age >= -60 && age <= SESSION_TTL_SECONDS && safeEqual(m[3]!, sign(token, issuedAt, m[2]!));
  return valid ? { id: m[2]!, left: Math.ceil(SESSION_TTL_SECONDS - age) } : null;
}

/** Sessions of the sign-in form: issued, checked (signature, age, not signed out) and ended. */
export class UiSessions {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly token: string,
  ) {}

  private signedOutKey(id: string): string {
    return `${this.prefix}:ui:signed-out:${id}`;
  }

  issue(now = Date.now()): string {
    const issuedAt = Math.floor(now / 1000);
    const id = randomBytes(16).toString('hex');
    return `${issuedAt}.${id}.${sign(this.token, issuedAt, id)}`;
  }

  async valid(value: string | undefined): Promise<boolean> {
    const session = sessionOf(this.token, value);
    return session !== null && (await this.redis.exists(this.signedOutKey(session.id))) === 0;
  }

  /** Signs the session out on every replica, until it would have expired anyway. */
  async end(value: string | undefined): Promise<void> {
    const session = sessionOf(this.token, value);
    if (session) await this.redis.set(this.signedOutKey(session.id), '1', 'EX', Math.max(1, session.left + 60));
  }
}

function bearerOf(c: Context): string | undefined {
  const auth = c.req.header('authorization');
  return (auth && /^Bearer\s+(.+)$/i.exec(auth)?.[1]?.trim()) || undefined;
}

/**
 * For a request signed in by its session cookie: whether that session still holds (a live stream
 * checks it as it goes: a sign-out, or the 12 hours past, ends it). Undefined otherwise.
 */
export function sessionCheck(c: Context, sessions: UiSessions | undefined): (() => Promise<boolean>) | undefined {
  if (!sessions || bearerOf(c)) return undefined;
  const cookie = getCookie(c, SESSION_COOKIE);
  return () => sessions.valid(cookie);
}

export async function presentsToken(c: Context, sessions: UiSessions): Promise<boolean> {
  const bearer = bearerOf(c);
  if (bearer) return safeEqual(bearer, sessions.token);
  return sessions.valid(getCookie(c, SESSION_COOKIE));
}

/**
 * 401 for a request without the token (a browser asking for a page gets the login form with
 * it); nothing to check when no token is set (the inspector is on loopback then). A Bearer
 * token is a guess like a sign-in: wrong ones count against the address, which is refused
 * any (429) once locked out.
 */
export function requireToken(
  sessions: UiSessions | undefined,
  throttle: SignInThrottle,
  loginPage: (c: Context<UiEnv>) => Response | Promise<Response>,
): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    if (!sessions || OPEN_PATHS.has(c.req.path)) return next();
    if (bearerOf(c)) {
      const address = clientAddress(c);
      // The token is compared first (in memory); a wrong one is counted before any answer.
      const right = await presentsToken(c, sessions);
      const wait = right ? await throttle.lockedFor(address) : await throttle.failed(address);
      if (wait) return tooManyFailures(c, wait);
      if (right) return next();
    } else if (await presentsToken(c, sessions)) return next();
    c.header('www-authenticate', 'Bearer realm="deepq"');
    // A browser's page, or its form sent after the session ended: the sign-in form, not a bare status.
    const fromBrowser = ['GET', 'POST'].includes(c.req.method) && (c.req.header('accept') ?? '').includes('text/html');
    return fromBrowser ? loginPage(c) : c.text('unauthorized: DEEPQ_UI_TOKEN required\n', 401);
  };
}
