// A one-shot command (status, cancel, resume, enqueue, ...) on a connection that retries without
// end (maxRetriesPerRequest: null, as BullMQ needs): with Redis gone after it connected, its
// commands just wait, and the command hung without a word; a Redis that stops answering on an
// open connection (frozen, a network cut without a reset) the same, for hours. This bounds that
// wait by what Redis answers: `watch` and `enqueue --wait` follow with their own limit instead
// (--redis-timeout, redis-patience.ts).
import type { Redis } from 'ioredis';

/** How long a one-shot command waits for Redis to answer again before it stops. */
export const ONE_SHOT_LOST_LIMIT_MS = 60_000;
/** How often the guard asks Redis (a PING) whether it still answers. */
const PROBE_MS = 5_000;

/**
 * Calls `giveUp(lastError)` once Redis has answered nothing for `limitMs` (a PING every
 * `probeMs` on the same connection, behind whatever the command sent); returns the guard's stop,
 * to call before the command closes the connection itself. Its timer keeps no process alive.
 */
export function guardLostRedis(
  redis: Redis,
  limitMs: number,
  giveUp: (lastError: string) => void,
  probeMs = Math.min(PROBE_MS, limitMs / 4),
): () => void {
  let heard = Date.now();
  let last = '';
  const onError = (err: Error) => {
    last = err.message;
  };
  const stop = () => {
    clearInterval(timer);
    redis.off('error', onError);
  };
  const timer = setInterval(() => {
    if (Date.now() - heard > limitMs) {
      stop();
      giveUp(last || `no answer for ${limitMs / 1000} s`);
    } else if (redis.status === 'ready') {
      redis.ping().then(
        () => (heard = Date.now()),
        () => {},
      );
    }
  }, probeMs);
  timer.unref();
  redis.on('error', onError);
  return stop;
}
