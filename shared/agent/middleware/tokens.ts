// Token accounting: input, output, cache-read and cache-write tokens of every response go
// to the usage sink (goal totals per role and model, metrics). With a call budget, the call's
// tokens are reserved first (its max output tokens may be lowered to what is left), and the
// reservation ends with the usage write, or at once when the call fails. A reserved call's real
// input count calibrates the estimate the next reservations use. What a failed attempt used (a
// stream cut, stalled or cancelled after it began: billed all the same) is booked too, with the
// answer that came after it or with the error.
import type { CallContext, ModelRequest, ModelUsage } from '../providers/types.ts';
import { spentBy } from '../providers/types.ts';
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

/** Books what failed attempts used: no reservation of its own, an estimate if any part was one. */
async function bookSpent(
  deps: Pick<MiddlewareDeps, 'usageSink'>,
  req: ModelRequest,
  ctx: CallContext,
  spent: ModelUsage | undefined,
): Promise<void> {
  if (!spent || !deps.usageSink) return;
  const usage = {
    input: spent.input_tokens,
    output: spent.output_tokens,
    cache_read: spent.cache_read_input_tokens ?? 0,
    cache_write: spent.cache_creation_input_tokens ?? 0,
  };
  await deps.usageSink(ctx, req.model, usage, undefined, { requested: req.model, estimated: spent.estimated === true });
}

export function tokenAccounting(deps: Pick<MiddlewareDeps, 'usageSink' | 'budget'>): ModelMiddleware {
  return async (req, ctx, next) => {
    const grant = deps.budget ? await deps.budget.reserve(req, ctx) : undefined;
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(grant ? { ...req, max_tokens: grant.maxTokens } : req);
    } catch (err) {
      await bookSpent(deps, req, ctx, spentBy(err)).catch(() => {});
      if (grant?.member) await deps.budget!.release(grant.member).catch(() => {});
      throw err;
    }
    await bookSpent(deps, req, ctx, res.spentBefore);
    const u = res.usage ?? { input_tokens: 0, output_tokens: 0 };
    const usage = {
      input: u.input_tokens ?? 0,
      output: u.output_tokens ?? 0,
      cache_read: u.cache_read_input_tokens ?? 0,
      cache_write: u.cache_creation_input_tokens ?? 0,
    };
    const origin = { requested: req.model, estimated: u.estimated === true };
    if (deps.usageSink) await deps.usageSink(ctx, res.model || req.model, usage, grant?.member || undefined, origin);
    else if (grant?.member) await deps.budget!.release(grant.member);
    if (grant?.member && !origin.estimated)
      await deps.budget!.calibrate?.(req, usage.input + usage.cache_read + usage.cache_write);
    // The agent must know when an answer stopped at the budget's limit rather than its own.
    return grant && grant.maxTokens < req.max_tokens ? { ...res, grantedMaxTokens: grant.maxTokens } : res;
  };
}
