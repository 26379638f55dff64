// Response headers that keep model-written content inert: a Content-Security-Policy that
// runs only the app's own script files (never inline script, never another origin's), no
// framing, no MIME sniffing, no referrer (goal ids) sent to other sites; same-origin
// requests keep theirs, so a form POST carries its real Origin rather than `null`.
import type { MiddlewareHandler } from 'hono';

const APP_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

// bull-board's page sets inline styles and a <base>; its scripts are still only its own files.
const BULL_BOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'self'",
  "frame-ancestors 'none'",
].join('; ');

export function securityHeaders(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    const bullBoard = c.req.path === '/queues' || c.req.path.startsWith('/queues/');
    // A route may set a stricter policy of its own (the artifact download sandboxes itself).
    if (!c.res.headers.has('content-security-policy')) {
      c.header('content-security-policy', bullBoard ? BULL_BOARD_CSP : APP_CSP);
    }
    c.header('x-content-type-options', 'nosniff');
    c.header('x-frame-options', 'DENY');
    c.header('referrer-policy', 'same-origin');
    c.header('cross-origin-opener-policy', 'same-origin');
    c.header('cross-origin-resource-policy', 'same-origin');
    // Pages show live state and model output: never from a shared cache.
    if (!c.req.path.startsWith('/static/')) c.header('cache-control', 'no-store');
  };
}
