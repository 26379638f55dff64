// A Redis at maxmemory (noeviction) refuses deepq's writes while BullMQ's own scripts still move
// jobs (a script whose first write frees memory, as BullMQ's moves do, may write on). A job whose
// run met a full Redis would use an attempt per refusal, a few seconds apart: a minute of full
// Redis failed subtasks for good and left no record of it (the record is a write too). Such a
// job goes back to the queue, delayed, using no attempt, a bounded number of times.
import { DelayedError, type Job } from 'bullmq';
import type { Runtime } from './runtime.ts';

/** Redis's reply to a write at maxmemory under noeviction. */
export const REDIS_FULL = /^OOM\b/;
/** Deliveries handed back for a full Redis before one fails its attempt as any error would. */
const MAX_HAND_BACKS = 8;
const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 30_000;

export const isRedisFull = (err: unknown): boolean => err instanceof Error && REDIS_FULL.test(err.message);

/**
 * Moves a job whose run met a full Redis to delayed (1 s, doubling to 30 s) and returns the
 * DelayedError that tells BullMQ so; null for any other error, past the bound, or when the move
 * itself is refused (the job then fails its attempt, or the stalled check hands it out again).
 */
export async function delayForFullRedis(rt: Runtime, job: Job, token: string | undefined, err: unknown) {
  if (!token || !isRedisFull(err)) return null;
  // deepq_redis_up stays 1 (a PING needs no memory): this count is what says Redis is full.
  rt.metrics.redisFull.inc({ where: 'job' });
  // Deliveries that used no attempt so far (hand-backs of any kind).
  const handBacks = job.attemptsStarted - job.attemptsMade - 1;
  if (handBacks >= MAX_HAND_BACKS) return null;
  const delayMs = Math.min(FIRST_DELAY_MS * 2 ** handBacks, MAX_DELAY_MS);
  try {
    await job.moveToDelayed(Date.now() + delayMs, token);
  } catch {
    return null;
  }
  rt.logger.warn(
    { jobId: job.id, goalId: job.data?.goalId, delayMs, handBacks: handBacks + 1 },
    'Redis is full (maxmemory): the job waits and runs again, using no attempt',
  );
  return new DelayedError();
}
