// What a worker does with the errors BullMQ reports outside any job (its fetches, its lock and
// stalled checks). A fetch Redis refuses for a reason other than a lost connection is retried by
// BullMQ at once, in a tight loop: a Redis at maxmemory (OOM) drew thousands of errors a second,
// each logged, a core busy and more load on the Redis that is full. An OOM pauses the worker's
// fetching (its running jobs go on) with a growing backoff; any error is logged once per message
// per interval, with how often it repeated.
import type { Worker } from 'bullmq';
import { REDIS_FULL } from './full-redis.ts';
import type { Runtime } from './runtime.ts';
import { scrubSecrets } from './scrub.ts';
import { throttled } from './throttle.ts';

const FIRST_PAUSE_MS = 1000;
const MAX_PAUSE_MS = 30_000;
/** The same message is logged at most once per this interval. */
const LOG_EVERY_MS = 10_000;

export function watchWorkerErrors(rt: Runtime, worker: Worker): void {
  const log = throttledLog(rt, LOG_EVERY_MS);
  let pauseMs = 0;
  // A job taken again: Redis accepts writes; the next OOM starts the backoff over.
  worker.on('active', () => {
    pauseMs = 0;
  });
  worker.on('error', (err) => {
    const message = scrubSecrets(err.message, rt.secrets);
    if (!REDIS_FULL.test(message) || worker.closing || worker.isPaused()) return log(message);
    rt.metrics.redisFull.inc({ where: 'fetch' });
    pauseMs = Math.min(Math.max(FIRST_PAUSE_MS, pauseMs * 2), MAX_PAUSE_MS);
    log(message, { pausedMs: pauseMs, hint: 'Redis is at maxmemory: free memory or raise it' });
    void worker.pause(true);
    setTimeout(() => {
      if (!worker.closing) void worker.resume();
    }, pauseMs).unref();
  });
}

/** Logs a message the first time, then at most once per interval with the repeats between. */
function throttledLog(rt: Runtime, everyMs: number) {
  const log = throttled<Record<string, unknown>>(everyMs, (message, repeated, extra) =>
    rt.logger.error({ err: { message }, ...repeated, ...extra }, 'worker error'),
  );
  return (message: string, extra: Record<string, unknown> = {}) => log(message, extra);
}
