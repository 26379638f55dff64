// The app's own static files (the client script and the stylesheet), read once at start and
// served from memory: a fixed list, so no request path ever reaches the filesystem.
import { readFileSync } from 'node:fs';
import type { Hono } from 'hono';
import type { UiEnv } from '../context.ts';

const FILES: Record<string, string> = {
  'goal-live.mjs': 'text/javascript; charset=utf-8',
  'ui.css': 'text/css; charset=utf-8',
};

export function registerStaticRoutes(app: Hono<UiEnv>): void {
  const served = new Map<string, string>();
  for (const name of Object.keys(FILES)) {
    served.set(name, readFileSync(new URL(`../static/${name}`, import.meta.url), 'utf8'));
  }
  app.get('/static/:file', (c) => {
    const file = c.req.param('file');
    const body = served.get(file);
    if (body === undefined) return c.text('not found\n', 404);
    c.header('content-type', FILES[file]!);
    // Short: a new deploy's script reaches open tabs on their next load. Private: the answer may
    // set the CSRF cookie, which no shared cache may hand to the next visitor.
    c.header('cache-control', 'private, max-age=300');
    return c.body(body);
  });
  app.get('/favicon.ico', (c) => c.body(null, 204));
}
