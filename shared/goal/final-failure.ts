// A plan or reflect job that failed for good fails its goal with the reason, while the goal is
// still at that job's cycle (queued or planning it; running or reflecting it): a job that failed
// for good after a later delivery or a human moved the goal on fails nothing. A job whose
// payload is malformed (written into the queue by something other than deepq) is not a job
// of any goal: it fails alone, naming the bad field, and never touches the goal it names.
import type { Job } from 'bullmq';
import { PlanJobSchema } from '../runtime/jobs.ts';
import { scrubSecrets } from '../runtime/logger.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { cutText } from '../text.ts';
import { atCycle, planCycle } from './lifecycle.ts';

const OF_JOB = {
  planning: { from: ['queued', 'planning'], guard: planCycle },
  reflection: { from: ['running', 'reflecting'], guard: atCycle },
} as const;

export function failGoalOnFinalFailure(rt: Runtime, what: keyof typeof OF_JOB) {
  return async (job: Job, err: Error): Promise<void> => {
    // Plan and reflect payloads share one shape: { goalId, step }.
    const parsed = PlanJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    const reason = cutText(`${what} failed: ${scrubSecrets(err.message, rt.secrets)}`, 1000);
    const { goalId, step } = parsed.data;
    await rt.lifecycle.fail(goalId, reason, step, OF_JOB[what].from, OF_JOB[what].guard(step));
  };
}
