// bull-board's page links its fonts from fonts.googleapis.com; the inspector must work offline
// with nothing from another origin (and its CSP would refuse the sheet, logging an error).
// bull-board has no option for it, so the page's HTML is served without any off-site <link>:
// its own stylesheet falls back to the system fonts.
import type { MiddlewareHandler } from 'hono';

/** A `<link>` whose href leaves this origin (a scheme, or `//host`). */
const OFF_SITE_LINK = /<link\b[^>]*\bhref\s*=\s*["']?(?:[a-z][a-z0-9+.-]*:)?\/\/[^>]*>\s*/gi;

export function withoutOffSiteLinks(html: string): string {
  return html.replace(OFF_SITE_LINK, '');
}

/** Rewrites the HTML answers of the routes it guards; API (JSON) and static files pass as they are. */
export function offlineBoardPage(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (c.req.method !== 'GET' || !c.res.headers.get('content-type')?.startsWith('text/html')) return;
    const body = withoutOffSiteLinks(await c.res.text());
    const headers = new Headers(c.res.headers);
    headers.delete('content-length');
    c.res = new Response(body, { status: c.res.status, headers });
  };
}
