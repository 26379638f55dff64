// The inspector's HTTP app. In order: a log line per request, HEAD answered without a body, a
// loopback Host when there is no token (DNS rebinding), security headers, the CSRF cookie, a cap
// on request bodies, the token (when set), the CSRF check on state-changing requests, the pages.
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { GOAL_MAX_BYTES } from '../../cli/goal-request.ts';
import { chromeOf } from './chrome.ts';
import type { UiContext, UiEnv } from './context.ts';
import { registerDecisionRoutes } from './decisions/index.ts';
import { headWithoutBody } from './head-requests.ts';
import { redisGate } from './redis-gate.ts';
import { requestLog } from './request-log.ts';
import { registerArtifactRoutes } from './routes/artifact.ts';
import { registerGoalRoute } from './routes/goal.ts';
import { registerGoalEventsRoute } from './routes/goal-events.ts';
import { registerGoalsRoutes } from './routes/goals.ts';
import { loginRequired, registerLoginRoutes } from './routes/login.ts';
import { registerQueueRoutes } from './routes/queues.ts';
import { registerStaticRoutes } from './routes/static.ts';
import { registerTranscriptRoute } from './routes/transcript.ts';
import { requireToken } from './security/auth.ts';
import { csrfCheck, csrfCookie } from './security/csrf.ts';
import { securityHeaders } from './security/headers.ts';
import { loopbackHostOnly } from './security/host-check.ts';
import { UPLOAD_MAX_BYTES } from './upload.ts';
import { errorPage } from './views/error-page.ts';
import { quoted } from './views/html.ts';

/**
 * A goal's text is at most 100 KB (cli/goal-request.ts), and a form sends it URL-encoded: each
 * byte outside ASCII as three. The largest goal, in any script, fits; nothing else is bigger.
 */
const MAX_BODY_BYTES = 3 * GOAL_MAX_BYTES + 16 * 1024;
/** The enqueue and resume forms: their fields, and the files they send (multipart: sent as they are). */
const UPLOAD_BODY_BYTES = MAX_BODY_BYTES + UPLOAD_MAX_BYTES;
/** The sign-in form (its token, CSRF field and `next`), the one body read without the token. */
const LOGIN_BODY_BYTES = 8 * 1024;
/** The paths whose forms carry files: only they take a larger body. */
const UPLOAD_PATHS = /^\/goals(\/[^/]+\/resume)?$/;

const REDIS_AWAY = 'The inspector could not answer (is Redis reachable?). Details are in its log.';

export function createApp(ctx: UiContext): Hono<UiEnv> {
  const app = new Hono<UiEnv>();
  app.use(requestLog(ctx.log, ctx.metrics));
  app.use(headWithoutBody());
  // First: the host check's refusal carries them too.
  app.use(securityHeaders());
  app.use(loopbackHostOnly(ctx.token));
  app.use(csrfCookie());
  app.use(redisGate(ctx.client.redis, (c) => c.html(errorPage(chromeOf(c, ctx), 'Redis is away', REDIS_AWAY), 503)));
  // The token before any body is read: a chunked body is held whole while it is measured, and 50
  // open 16 MiB uploads without the token held 0.9 GB. The sign-in form alone is small.
  app.use(requireToken(ctx.sessions, ctx.signIn, (c) => loginRequired(c, ctx)));
  app.use(bodyLimits(ctx));
  app.use(csrfCheck());
  registerStaticRoutes(app);
  registerLoginRoutes(app, ctx);
  registerGoalsRoutes(app, ctx);
  registerGoalRoute(app, ctx);
  registerGoalEventsRoute(app, ctx);
  registerDecisionRoutes(app, ctx);
  registerArtifactRoutes(app, ctx);
  registerTranscriptRoute(app, ctx);
  registerQueueRoutes(app, ctx);
  app.notFound((c) => c.html(errorPage(chromeOf(c, ctx), 'Not found', `Nothing at ${quoted(c.req.path)}.`), 404));
  app.onError((err, c) => {
    if (err instanceof HTTPException && err.status === 400) {
      ctx.log.warn({ path: c.req.path, err: err.message }, 'request refused');
      return c.html(errorPage(chromeOf(c, ctx), 'Bad request', err.message), 400);
    }
    // The client left while its body came (a closed tab mid-upload): its fault, not the inspector's.
    if ((err as NodeJS.ErrnoException).code === 'ECONNRESET') {
      ctx.log.info({ path: c.req.path }, 'client went away before its request was read');
      return c.body(null, 499 as ContentfulStatusCode);
    }
    ctx.log.error({ err: { message: err.message, stack: err.stack }, path: c.req.path }, 'request failed');
    // The message may come from Redis or the filesystem: the page says what to do, not what broke.
    // Redis away: try again later (503), where anything else is the inspector's fault (500).
    const status = ctx.client.redis.status === 'ready' ? 500 : 503;
    return c.html(errorPage(chromeOf(c, ctx), 'Something went wrong', REDIS_AWAY), status);
  });
  return app;
}

/** Per path: files on the enqueue and resume forms, a goal's text elsewhere, a token at /login. */
function bodyLimits(ctx: UiContext): MiddlewareHandler<UiEnv> {
  const limit = (maxSize: number) => bodyLimit({ maxSize, onError: (c) => tooLarge(c, ctx, maxSize) });
  const [login, form, upload] = [limit(LOGIN_BODY_BYTES), limit(MAX_BODY_BYTES), limit(UPLOAD_BODY_BYTES)];
  return (c, next) => {
    if (c.req.path === '/login') return login(c, next);
    return (c.req.method === 'POST' && UPLOAD_PATHS.test(c.req.path) ? upload : form)(c, next);
  };
}

/** Over the body limit: a page that says what the limit is, not a bare status. */
function tooLarge(c: Context<UiEnv>, ctx: UiContext, limit: number): Response | Promise<Response> {
  const files = limit > MAX_BODY_BYTES ? ` and its files at most ${UPLOAD_MAX_BYTES / 1024 / 1024} MiB in all` : '';
  const what =
    limit === LOGIN_BODY_BYTES ? 'the sign-in form holds a token' : `a goal's text is at most 100 KB${files}`;
  const message = `The request is over ${Math.round(limit / 1024)} KiB: ${what}.`;
  return c.html(errorPage(chromeOf(c, ctx), 'Request too large', message), 413);
}
