// Token accounting: input, output, cache-read and cache-write tokens of every response go
// to the usage sink (goal totals per role and model, metrics, budget checks).
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

export function tokenAccounting(deps: Pick<MiddlewareDeps, 'usageSink'>): ModelMiddleware {
  return async (req, ctx, next) => {
    const res = await next(req);
    const u = res.usage ?? { input_tokens: 0, output_tokens: 0 };
    await deps.usageSink?.(ctx, res.model || req.model, {
      input: u.input_tokens ?? 0,
      output: u.output_tokens ?? 0,
      cache_read: u.cache_read_input_tokens ?? 0,
      cache_write: u.cache_creation_input_tokens ?? 0,
    });
    return res;
  };
}
