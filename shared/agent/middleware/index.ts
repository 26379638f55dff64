// The middleware registry: a role lists names; the stack is always applied in one order
// (outermost first) so a config cannot, say, count tokens outside the retry loop. Tier
// routing comes first so every other layer (logging included) sees the real model id.

import type { CallContext, ModelRequest, ModelResponse } from '../providers/types.ts';
import type { MIDDLEWARE_NAMES } from '../roles.ts';
import { logging } from './logging.ts';
import { promptCache } from './prompt-cache.ts';
import { retry } from './retry.ts';
import { tierRouting } from './tier-routing.ts';
import { tokenAccounting } from './tokens.ts';
import type { MiddlewareDeps, ModelMiddleware, Next } from './types.ts';

type Name = (typeof MIDDLEWARE_NAMES)[number];
const ORDER: Name[] = ['tier-routing', 'logging', 'prompt-cache', 'tokens', 'retry'];
const FACTORIES: Record<Name, (deps: MiddlewareDeps) => ModelMiddleware> = {
  logging,
  'tier-routing': tierRouting,
  'prompt-cache': promptCache,
  tokens: tokenAccounting,
  retry,
};

export function buildMiddleware(names: readonly Name[], deps: MiddlewareDeps): ModelMiddleware[] {
  return ORDER.filter((n) => names.includes(n)).map((n) => FACTORIES[n](deps));
}

export function compose(
  stack: ModelMiddleware[],
  ctx: CallContext,
  call: Next,
): (req: ModelRequest) => Promise<ModelResponse> {
  return stack.reduceRight<Next>((next, mw) => (req) => mw(req, ctx, next), call);
}

export type { MiddlewareDeps, ModelMiddleware, UsageSink } from './types.ts';
