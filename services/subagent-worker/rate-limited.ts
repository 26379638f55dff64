// A subtask whose model call got a 429: the role's queue pauses in every process for
// retry-after and the job goes back (fleet flow control: the account's limit is everyone's).
// A job that has paused its queue QUEUE_PAUSES_PER_JOB times and still gets 429s is refused
// alone (a request over the account's per-minute tokens is refused every time): it waits by
// itself, at the back of the queue, and every other goal's jobs go on. Were the limit the
// account's, their own 429s pause the queue again.
import { type Job, type Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { ProviderRateLimitError } from '../../shared/errors.ts';
import { pauseQueueForRateLimit, WaitsAloneForRateLimit } from '../../shared/runtime/queue-rate-limit.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

export const QUEUE_PAUSES_PER_JOB = 3;

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
  if (requeues > QUEUE_PAUSES_PER_JOB && token) {
    log.warn({ retryAfterMs: err.retryAfterMs, requeues }, 'provider rate limit again for this job: it waits alone');
    await job.moveToDelayed(Date.now() + Math.max(1, err.retryAfterMs), token);
    throw new WaitsAloneForRateLimit();
  }
  log.warn({ retryAfterMs: err.retryAfterMs, requeues }, 'provider rate limit: pausing the queue');
  await pauseQueueForRateLimit(rt, deps.queue, err.retryAfterMs);
  throw Worker.RateLimitError();
}
