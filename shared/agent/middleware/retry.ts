// Retry with exponential backoff and jitter on 429, 5xx, timeouts, connection errors and
// malformed bodies; honours retry-after (0 included). In a worker, a 429 (or a 529, overloaded)
// is not retried here: it becomes ProviderRateLimitError so the whole queue pauses (fleet flow
// control). Elsewhere it is retried in place more patiently than a fault: an overload lasting a
// minute or two must not fail the goal. The planner and reflector (`patient`) wait out a 5xx or a
// dropped connection as long: their job failing for good fails the goal.
import { setTimeout as sleep } from 'node:timers/promises';
import { ProviderRateLimitError } from '../../errors.ts';
import { addUsage, ModelCallError, type ModelUsage, spentBy } from '../providers/types.ts';
import type { MiddlewareDeps, ModelMiddleware } from './types.ts';

export function backoffMs(attempt: number, base: number, max: number, random = Math.random): number {
  const exp = Math.min(max, base * 2 ** attempt);
  return Math.round(exp / 2 + random() * (exp / 2));
}

/** The longest a 429 pauses a role's queue (subagent workers hand 429s to their queue). */
export const MAX_QUEUE_PAUSE_MS = 5 * 60_000;
/** Retries in place of a rate limit (a patient caller's outage too) at least: about 90 s of waiting by default. */
export const RATE_LIMIT_RETRIES = 8;

/** A rate limit is waited out longer than a fault; for a patient caller, a 5xx or a reset too. */
function retriesFor(err: ModelCallError, maxRetries: number, patient = false): number {
  const outage = err.kind === 'server' || err.kind === 'connection';
  return err.kind === 'rate_limit' || (patient && outage) ? Math.max(maxRetries, RATE_LIMIT_RETRIES) : maxRetries;
}

/** The error carrying what the call's failed attempts used, for token accounting to book. */
function withSpent<E>(err: E, spent: ModelUsage | undefined): E {
  if (spent && err instanceof Error) Object.assign(err, { spent });
  return err;
}

export function retry(deps: Pick<MiddlewareDeps, 'retry' | 'logger'>): ModelMiddleware {
  const maxRetries = deps.retry?.maxRetries ?? 3;
  const base = deps.retry?.baseDelayMs ?? 500;
  const max = deps.retry?.maxDelayMs ?? 30_000;
  return async (req, ctx, next) => {
    // What failed attempts used: it goes up with the answer, or with the error that ends the call.
    let spent: ModelUsage | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await next(req);
        return spent ? { ...res, spentBefore: spent } : res;
      } catch (failure) {
        spent = addUsage(spent, spentBy(failure));
        const err = withSpent(failure, spent);
        if (!(err instanceof ModelCallError) || !err.retryable) throw err;
        if (err.kind === 'rate_limit' && deps.retry?.rateLimitToQueue) {
          // It pauses a role's whole queue: a retry-after of hours (or a server clock far ahead)
          // is capped; the job then tries again, and another 429 pauses it again. Without one,
          // the pause grows with the job's put-backs (rate-limited.ts): here it is always the first try.
          const pause = err.retryAfterMs === undefined ? undefined : Math.min(err.retryAfterMs, MAX_QUEUE_PAUSE_MS);
          throw withSpent(new ProviderRateLimitError(err.message, pause), spent);
        }
        if (attempt >= retriesFor(err, maxRetries, deps.retry?.patient)) throw err;
        // Capped at the max delay; the log says what is really waited.
        const wait = Math.min(err.retryAfterMs ?? backoffMs(attempt, base, max), max);
        deps.logger.info(
          {
            goalId: ctx.goalId,
            role: ctx.role,
            threadId: ctx.threadId,
            attempt: attempt + 1,
            waitMs: wait,
            kind: err.kind,
          },
          'retrying model call',
        );
        try {
          await sleep(wait, undefined, { signal: ctx.signal });
        } catch {
          throw withSpent(new ModelCallError('model call aborted', 'aborted'), spent);
        }
      }
    }
  };
}
