// One pino line per request: method, path, route pattern, status, time. Never a header, a
// cookie, a query string or a body, so neither the token nor a session ever reaches the log.
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { UiMetrics } from './metrics.ts';

export function requestLog(log: Logger, metrics: UiMetrics): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const seconds = (performance.now() - started) / 1000;
    // The matched pattern (`/goals/:id`), never the path itself, as a metric label.
    const route = c.req.routePath || 'unmatched';
    const method = c.req.method;
    const status = c.res.status;
    metrics.requests.inc({ route, method, status: String(status) });
    metrics.requestDuration.observe({ route, method }, seconds);
    const line = { method, path: c.req.path, route, status, ms: Math.round(seconds * 1000) };
    if (status >= 500) log.error(line, 'request');
    else log.info(line, 'request');
  };
}
