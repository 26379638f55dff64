// A one-shot command (status, cancel, resume, enqueue, ...) on a connection that retries without
// end (maxRetriesPerRequest: null, as BullMQ needs): with Redis gone after it connected, its
// commands just wait, and the command hung without a word. This bounds that wait. `watch` and
// `enqueue --wait` follow on with their own limit (--redis-timeout, redis-patience.ts) instead.
import type { Redis } from 'ioredis';

/** How long a one-shot command waits for a lost Redis to come back before it stops. */
export const ONE_SHOT_LOST_LIMIT_MS = 60_000;

/**
 * Calls `giveUp(lastError)` once the connection has been down `limitMs` on end (back in time
 * resets it); returns the guard's stop, to call before the command closes the connection itself.
 */
export function guardLostRedis(redis: Redis, limitMs: number, giveUp: (lastError: string) => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  let last = '';
  const onError = (err: Error) => {
    last = err.message;
  };
  // Not unref'd: a command waiting on a lost Redis has nothing else keeping it alive but ioredis.
  const onDown = () => {
    timer ??= setTimeout(() => giveUp(last), limitMs);
  };
  const onReady = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  redis.on('error', onError);
  redis.on('close', onDown);
  redis.on('ready', onReady);
  return () => {
    clearTimeout(timer);
    redis.off('error', onError);
    redis.off('close', onDown);
    redis.off('ready', onReady);
  };
}
