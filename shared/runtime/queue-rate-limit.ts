// Fleet-wide flow control for a role's queue: a provider 429 pauses the queue in every process
// for retry-after. BullMQ honours a manual rate limit (Queue.rateLimit) only where a job limit
// is configured, and a configured limit costs a GET, an INCR and an HEXISTS on every job taken.
// So the limit is BullMQ's global one (queue meta `max`/`duration`), switched on by the 429
// and off again by the reflector's sweep once no 429 has been seen for the hold time: a queue
// that is never limited pays nothing per job.
//
// A 429 racing the sweep's switch-off (the limit removed between the sweep's check and its
// removal) leaves that pause unenforced: the next call to get a 429 switches the limit on again.
import { DelayedError, type Queue } from 'bullmq';
import { subagentQueueName } from './queues.ts';
import type { Runtime } from './runtime.ts';

/** A job refused again after pausing its queue often enough moved itself to wait alone (rate_limited). */
export class WaitsAloneForRateLimit extends DelayedError {}

/** Jobs per window while switched on: high enough never to bind by itself. */
const LIMIT_MAX = 1_000_000;
const LIMIT_WINDOW_MS = 1000;

function holdKey(prefix: string, queueName: string): string {
  return `${prefix}:ratelimit-hold:${queueName}`;
}

/**
 * Pauses the queue in every process for `retryAfterMs`: the global limit first (so that
 * every fetch from here on reads the limiter key), then the hold, then the pause itself.
 */
export async function pauseQueueForRateLimit(
  rt: Pick<Runtime, 'redis' | 'cfg'>,
  queue: Queue,
  retryAfterMs: number,
): Promise<void> {
  const ms = Math.max(1, Math.ceil(retryAfterMs));
  await queue.setGlobalRateLimit(LIMIT_MAX, LIMIT_WINDOW_MS);
  await rt.redis.set(holdKey(rt.cfg.prefix, queue.name), '1', 'PX', ms + rt.cfg.modelRetry.rateLimitHoldSeconds * 1000);
  await queue.rateLimit(ms);
}

/** The sweep's part: switches the limit off on queues whose hold has run out. Returns how many. */
export async function releaseIdleRateLimits(rt: Runtime): Promise<number> {
  let released = 0;
  for (const name of rt.cfg.roles.map((r) => subagentQueueName(r.name))) {
    const queue = rt.queues.get(name);
    if (!(await queue.getGlobalRateLimit())) continue;
    if (await rt.redis.exists(holdKey(rt.cfg.prefix, name))) continue;
    await queue.removeGlobalRateLimit();
    rt.logger.info({ queue: name }, 'provider rate limit released: no 429 within the hold time');
    released++;
  }
  return released;
}
