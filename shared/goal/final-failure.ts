// A plan or reflect job that failed for good fails its goal with the reason. A job whose
// payload is malformed (written into the queue by something other than deepq) is not a job
// of any goal: it fails alone, naming the bad field, and never touches the goal it names.
import type { Job } from 'bullmq';
import { PlanJobSchema } from '../runtime/jobs.ts';
import { scrubSecrets } from '../runtime/logger.ts';
import type { Runtime } from '../runtime/runtime.ts';

export function failGoalOnFinalFailure(rt: Runtime, what: string) {
  return async (job: Job, err: Error): Promise<void> => {
    // Plan and reflect payloads share one shape: { goalId, step }.
    const parsed = PlanJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    const reason = `${what} failed: ${scrubSecrets(err.message, rt.secrets)}`.slice(0, 1000);
    await rt.lifecycle.fail(parsed.data.goalId, reason, parsed.data.step);
  };
}
