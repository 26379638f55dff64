// Every deepq queue's depth by state, and the most recent failed jobs across them (bull-board
// at /queues has the full picture; this is the one-glance view).
import type { Job } from 'bullmq';
import { isGoalId } from '../../../shared/goal/ids.ts';
import type { UiContext } from '../context.ts';

export const QUEUE_STATES = [
  'waiting',
  'prioritized',
  'active',
  'delayed',
  'waiting-children',
  'failed',
  'completed',
] as const;

export interface QueueDepth {
  queue: string;
  counts: Record<(typeof QUEUE_STATES)[number], number>;
  paused: boolean;
}

export interface JobFailure {
  queue: string;
  jobId: string;
  name: string;
  reason: string;
  attempts: number;
  at: number;
  goalId: string | null;
}

const FAILURES_PER_QUEUE = 10;
const FAILURES_SHOWN = 25;

function failure(queue: string, job: Job): JobFailure {
  const goalId = typeof job.data?.goalId === 'string' && isGoalId(job.data.goalId) ? job.data.goalId : null;
  return {
    queue,
    jobId: String(job.id),
    name: job.name,
    reason: job.failedReason ?? '',
    attempts: job.attemptsMade,
    at: job.finishedOn ?? job.timestamp,
    goalId,
  };
}

export async function queueOverview(ctx: UiContext): Promise<{ depths: QueueDepth[]; failures: JobFailure[] }> {
  const names = ctx.client.queues.allNames();
  const per = await Promise.all(
    names.map(async (name) => {
      const q = ctx.client.queues.get(name);
      const [counts, paused, failed] = await Promise.all([
        q.getJobCounts(...QUEUE_STATES),
        q.isPaused(),
        q.getFailed(0, FAILURES_PER_QUEUE - 1),
      ]);
      const depth = { queue: name, counts: counts as QueueDepth['counts'], paused };
      return { depth, failures: failed.filter(Boolean).map((j) => failure(name, j)) };
    }),
  );
  const failures = per
    .flatMap((p) => p.failures)
    .sort((a, b) => b.at - a.at)
    .slice(0, FAILURES_SHOWN);
  return { depths: per.map((p) => p.depth), failures };
}
