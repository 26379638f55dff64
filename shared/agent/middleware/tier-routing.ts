// HIGH/LOW tiers map to model ids from config, so a role's cost/quality can change by config.
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

export function tierRouting(deps: Pick<MiddlewareDeps, 'models'>): ModelMiddleware {
  return (req, ctx, next) => next({ ...req, model: deps.models[ctx.tier] });
}
