// HIGH/LOW tiers map to model refs from config (`<provider>:<id>`, a bare id meaning anthropic),
// so a role's cost/quality can change by config; an agent with its own `model` uses that instead.
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

export function tierRouting(deps: Pick<MiddlewareDeps, 'models'>): ModelMiddleware {
  return (req, ctx, next) => next({ ...req, model: ctx.roleModel ?? deps.models[ctx.tier] });
}
