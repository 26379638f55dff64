// One structured line per model call, with the goal/step/role/thread it belongs to (those the
// logger does not carry already: a job's logger binds them, and a key twice in one JSON line
// is one too many for some log pipelines).
import type { Logger } from 'pino';
import type { CallContext } from '../providers/types.ts';
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

function callFields(logger: Logger, ctx: CallContext, model: string, started: number): Record<string, unknown> {
  const bound = logger.bindings();
  const all: Record<string, unknown> = { goalId: ctx.goalId, step: ctx.step, role: ctx.role, threadId: ctx.threadId };
  const fields = Object.fromEntries(Object.entries(all).filter(([k]) => !(k in bound)));
  return { ...fields, model, ms: Math.round(performance.now() - started) };
}

export function logging(deps: Pick<MiddlewareDeps, 'logger'>): ModelMiddleware {
  return async (req, ctx, next) => {
    const started = performance.now();
    try {
      const res = await next(req);
      // Checked first: building the line costs on every call, and debug is usually off.
      if (!deps.logger.isLevelEnabled('debug')) return res;
      const fields = callFields(deps.logger, ctx, req.model, started);
      deps.logger.debug({ ...fields, stop: res.stop_reason, usage: res.usage }, 'model call');
      return res;
    } catch (err) {
      const e = err as { message?: string; name?: string; kind?: string };
      const fields = { ...callFields(deps.logger, ctx, req.model, started), err: { message: e.message, name: e.name } };
      // A call aborted on purpose (a cancel, a shutdown, a lost lock) is no failure to look into.
      if (e.kind === 'aborted') deps.logger.info(fields, 'model call aborted');
      else deps.logger.warn(fields, 'model call failed');
      throw err;
    }
  };
}
