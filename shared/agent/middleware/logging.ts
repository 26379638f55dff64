// One structured line per model call, with the goal/step/role/thread it belongs to.
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

export function logging(deps: Pick<MiddlewareDeps, 'logger'>): ModelMiddleware {
  return async (req, ctx, next) => {
    const started = performance.now();
    const fields = { goalId: ctx.goalId, step: ctx.step, role: ctx.role, threadId: ctx.threadId, model: req.model };
    try {
      const res = await next(req);
      // Checked first: building the line costs on every call, and debug is usually off.
      if (!deps.logger.isLevelEnabled('debug')) return res;
      deps.logger.debug(
        { ...fields, ms: Math.round(performance.now() - started), stop: res.stop_reason, usage: res.usage },
        'model call',
      );
      return res;
    } catch (err) {
      deps.logger.warn(
        {
          ...fields,
          ms: Math.round(performance.now() - started),
          err: { message: (err as Error).message, name: (err as Error).name },
        },
        'model call failed',
      );
      throw err;
    }
  };
}
