// Cookie flags shared by the session and CSRF cookies.
import type { Context } from 'hono';
import type { CookieOptions } from 'hono/utils/cookie';

/** Over HTTPS (directly or behind a TLS-terminating proxy) cookies are marked Secure. */
function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
}

/** HttpOnly (no script reads them), SameSite=Strict (no other site sends them), whole app. */
export function cookieOptions(c: Context, maxAgeSeconds?: number): CookieOptions {
  return {
    httpOnly: true,
    sameSite: 'Strict',
    path: '/',
    secure: isHttps(c),
    ...(maxAgeSeconds !== undefined ? { maxAge: maxAgeSeconds } : {}),
  };
}
