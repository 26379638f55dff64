// A subtask whose model call got a 429: the role's queue pauses in every process for
// retry-after and the job goes back (fleet flow control: the account's limit is everyone's).
// A job that has paused its queue QUEUE_PAUSES_PER_JOB times and still gets 429s is refused
// alone (a request over the account's per-minute tokens is refused every time): it waits by
// itself, at the back of the queue, and every other goal's jobs go on. Were the limit the
// account's, their own 429s pause the queue again.
import { type Job, type Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { backoffMs } from '../../shared/agent/middleware/retry.ts';
import type { ProviderRateLimitError } from '../../shared/errors.ts';
import { pauseQueueForRateLimit, WaitsAloneForRateLimit } from '../../shared/runtime/queue-rate-limit.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

export const QUEUE_PAUSES_PER_JOB = 3;
/** The first pause of a 429 without retry-after (1-2 s); it doubles with each put-back in a row, to a minute. */
export const FIRST_RATE_LIMIT_PAUSE_MS = 1000;
export const MAX_GUESSED_RATE_LIMIT_PAUSE_MS = 60_000;

/**
 * A 429 without retry-after (common behind OpenAI-compatible gateways) paused the queue 250-500 ms
 * every time: the role hammered a refusing endpoint and its job failed 20 s in. It now backs off.
 */
export function rateLimitPauseMs(err: ProviderRateLimitError, requeues: number): number {
  return err.retryAfterMs ?? backoffMs(requeues - 1, FIRST_RATE_LIMIT_PAUSE_MS * 2, MAX_GUESSED_RATE_LIMIT_PAUSE_MS);
}

/** A call of the job answered since its last put-back: the 429s are no longer in a row. */
export function clearRateLimitRequeues(job: Job, log: Logger): void {
  if (!Number(job.data?.rateLimitRequeues ?? 0)) return;
  job.updateData({ ...job.data, rateLimitRequeues: 0 }).catch((err: Error) => {
    log.warn({ err: { message: err.message } }, 'could not reset the rate-limit put-backs count');
  });
}

export async function putBackForRateLimit(
  deps: { rt: Runtime; queue: Queue },
  job: Job,
  token: string | undefined,
  err: ProviderRateLimitError,
  log: Logger,
): Promise<never> {
  const { rt } = deps;
  // A provider that never stops saying 429 must not keep a job circling forever, though.
  const requeues = Number(job.data?.rateLimitRequeues ?? 0) + 1;
  if (requeues > rt.cfg.modelRetry.maxRateLimitRequeues) {
    throw new Error(`provider rate limit persisted through ${requeues - 1} queue pauses: ${err.message}`);
  }
  await job.updateData({ ...job.data, rateLimitRequeues: requeues });
  const pauseMs = rateLimitPauseMs(err, requeues);
  if (requeues > QUEUE_PAUSES_PER_JOB && token) {
    log.warn({ retryAfterMs: pauseMs, requeues }, 'provider rate limit again for this job: it waits alone');
    await job.moveToDelayed(Date.now() + Math.max(1, pauseMs), token);
    throw new WaitsAloneForRateLimit();
  }
  log.warn({ retryAfterMs: pauseMs, requeues }, 'provider rate limit: pausing the queue');
  await pauseQueueForRateLimit(rt, deps.queue, pauseMs);
  throw Worker.RateLimitError();
}
