// A follow loop (watch, enqueue --wait) reads Redis every fraction of a second on a connection
// that retries without end (maxRetriesPerRequest: null): with Redis gone, a read just waits.
// This bounds that wait: the user hears of it after a few seconds, and past a limit the
// command stops with an error instead of hanging silently.
import type { Redis } from 'ioredis';

/** How long a read may go unanswered before the user is told Redis is away. */
export const LOST_NOTICE_MS = 5_000;
/** How long `watch` and `enqueue --wait` keep retrying without Redis, unless told otherwise. */
export const DEFAULT_LOST_LIMIT_MS = 60_000;

/** Redis did not answer within the limit. */
export class RedisLostError extends Error {}

export interface PatienceOptions {
  /** Give up (reject) after this long without an answer; never when undefined. */
  limitMs?: number;
  /** Told once, after LOST_NOTICE_MS without an answer, and again when Redis is back. */
  onLost?: (message: string) => void;
  onBack?: (message: string) => void;
}

/**
 * Resolves to `read`'s result; past `limitMs` without one, rejects with an error naming the
 * Redis (`redactedUrl`: no password), how long, and the connection's last error. The read
 * itself stays ioredis's to retry.
 */
export async function answered<T>(
  redis: Redis,
  redactedUrl: string,
  read: Promise<T>,
  opts: PatienceOptions,
): Promise<T> {
  let lastError = '';
  const onError = (err: Error) => {
    lastError = err.message;
  };
  redis.on('error', onError);
  const where = `Redis at ${redactedUrl}`;
  const why = () => (lastError ? ` (${lastError})` : '');
  let noticed = false;
  const timers: NodeJS.Timeout[] = [];
  try {
    const result = await new Promise<T>((resolve, reject) => {
      read.then(resolve, reject);
      const notice = () => {
        noticed = true;
        opts.onLost?.(`lost the connection to ${where}${why()}, retrying`);
      };
      timers.push(setTimeout(notice, LOST_NOTICE_MS));
      if (opts.limitMs === undefined) return;
      const secs = Math.round(opts.limitMs / 1000);
      timers.push(
        setTimeout(() => reject(new RedisLostError(`no answer from ${where} for ${secs} s${why()}`)), opts.limitMs),
      );
    });
    if (noticed) opts.onBack?.(`${where} answers again`);
    return result;
  } finally {
    for (const t of timers) clearTimeout(t);
    redis.off('error', onError);
  }
}
