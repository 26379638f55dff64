// Hono answers a HEAD request by running the GET route and dropping the body it made, without
// cancelling it: a live feed went on following its goal (timers, Redis reads, a blocking
// connection) until the goal was swept, and an artifact download kept its file open, for every
// `curl -I`. The body is cancelled here, which ends a stream as a client leaving does.
import type { MiddlewareHandler } from 'hono';
import type { UiEnv } from './context.ts';

export function headWithoutBody(): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    await next();
    if (c.req.method !== 'HEAD' || !c.res.body) return;
    const { status, statusText, headers } = c.res;
    await c.res.body.cancel().catch(() => {});
    c.res = new Response(null, { status, statusText, headers });
  };
}
