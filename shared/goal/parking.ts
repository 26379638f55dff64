// A goal paused at a budget (`--on-budget pause`) waits for a human in `awaiting_human`; its
// jobs wait with it. A plan, subtask or reflect job that finds its goal paused (at start, or
// when a model call's reservation is refused) parks itself: it moves to BullMQ's delayed set
// (no attempt used, no worker slot held; a flow parent keeps waiting for a parked child) and
// is listed in the goal's `parked` hash. `deepq resume --max-tokens N` raises the budget and
// promotes every parked job, which carries on where it stopped (a subtask from its saved
// messages). The delay is a backstop only: past the awaiting retention the goal is ended, and
// a job that wakes then finds it terminal and stops.
import { randomBytes } from 'node:crypto';
import { DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Queues } from '../runtime/queues.ts';
import { runScript } from '../runtime/scripts.ts';
import { promotePaused } from './approvals.ts';
import type { GoalRecord, GoalStore } from './store.ts';

export function isPausedForBudget(goal: Pick<GoalRecord, 'status' | 'pausedFor'>): boolean {
  return goal.status === 'awaiting_human' && goal.pausedFor === 'budget';
}

/** Past the retention the goal is ended (a sweep or two later); its parked jobs wake 60 s after. */
const PARKED_MARGIN_SECONDS = 3600;

export interface ParkingState {
  redis: Redis;
  goals: GoalStore;
  queues: Queues;
  cfg: { awaitingRetentionSeconds: number; goalKeyTtlSeconds: number };
}

/**
 * Parks a running job until its goal is resumed; always throws DelayedError (BullMQ then
 * leaves the job where it is). A resume that landed before the move found no delayed job to
 * promote, so the goal is read again after it: no longer paused → the job promotes itself.
 */
export async function parkForBudget(
  s: ParkingState,
  job: Job,
  token: string | undefined,
  goalId: string,
): Promise<never> {
  if (!token) throw new Error('a job parking at a budget needs its lock token (run it in a worker)');
  const key = s.goals.keys.parked(goalId);
  // The goal's own keys do not expire while it waits (up to its awaiting retention): nor may
  // the list of its parked jobs, a subtask's saved messages (its checkpoint, written before) or
  // the decisions on its calls (a human may approve one during the pause).
  const ttl = Math.max(s.cfg.goalKeyTtlSeconds, s.cfg.awaitingRetentionSeconds + PARKED_MARGIN_SECONDS);
  const k = s.goals.keys;
  await s.redis
    .multi()
    .hset(key, String(job.id), parkedEntry(job.queueName))
    .expire(key, ttl)
    .expire(k.checkpoints(goalId), ttl)
    .expire(k.approvals(goalId), ttl)
    .exec();
  await job.moveToDelayed(Date.now() + (s.cfg.awaitingRetentionSeconds + 60) * 1000, token);
  const goal = await s.goals.get(goalId);
  if (!goal || !isPausedForBudget(goal)) await job.promote().catch(() => {}); // already promoted: fine
  throw new DelayedError();
}

/**
 * A job whose move was refused because its goal paused at a budget meanwhile (the deadline
 * paused it while the job's model call ran) parks with it; otherwise nothing happens.
 */
export async function parkIfPausedForBudget(s: ParkingState, job: Job, token: string | undefined, goalId: string) {
  const goal = await s.goals.get(goalId);
  if (goal && isPausedForBudget(goal)) await parkForBudget(s, job, token, goalId);
}

/**
 * A parked hash entry: the job's queue and an id of this parking. A woken job that parks again
 * writes a new one, so the wake that read the old one cannot take the new one off the list
 * (it did: the job then stayed delayed past a second resume, its goal running for 30 days).
 */
function parkedEntry(queue: string): string {
  return `${queue} ${randomBytes(6).toString('hex')}`;
}

/** The queue of a parked entry (an entry written before the park id is the queue alone). */
export function parkedQueue(entry: string): string {
  return entry.split(' ')[0]!;
}

/** Wakes every job parked on the goal (after its budget was raised); returns how many were delayed. */
export async function promoteParked(s: Pick<ParkingState, 'redis' | 'goals' | 'queues'>, goalId: string) {
  const key = s.goals.keys.parked(goalId);
  let promoted = 0;
  for (const [jobId, entry] of Object.entries(await s.redis.hgetall(key))) {
    if (await promotePaused(s.queues, { queue: parkedQueue(entry), jobId })) promoted++;
    await runScript(s.redis, 'parkedRelease', [key], [jobId, entry]);
  }
  return promoted;
}
