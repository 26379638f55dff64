// What happens when a job fails for good: a plan or reflect job fails the goal with the
// reason; a subtask's failure is recorded and reflection goes on without it. A job whose
// payload is malformed (written into the queue by something other than deepq) is not a
// job of any goal: it fails alone, naming the bad field, and never touches the goal it names.
import type { Job } from 'bullmq';
import type { Runtime } from '../runtime/runtime.ts';
import { scrubSecrets } from '../runtime/logger.ts';
import { PlanJobSchema, SubagentJobSchema } from '../runtime/jobs.ts';
import { subagentQueueName } from '../runtime/queues.ts';

export function failGoalOnFinalFailure(rt: Runtime, what: string) {
  return async (job: Job, err: Error): Promise<void> => {
    // Plan and reflect payloads share one shape: { goalId, step }.
    if (!PlanJobSchema.safeParse(job.data).success) return;
    const goalId: string = job.data.goalId;
    const reason = `${what} failed: ${scrubSecrets(err.message, rt.secrets)}`.slice(0, 1000);
    if (await rt.goals.transition(goalId, { to: 'failed', fields: { reason }, event: { type: 'finished', status: 'failed', step: job.data?.step, reason } })) {
      rt.metrics.goals.inc({ status: 'failed' });
    }
  };
}

export function recordSubtaskFailure(rt: Runtime) {
  return async (job: Job, err: Error): Promise<void> => {
    if (!SubagentJobSchema.safeParse(job.data).success) return;
    const { goalId, step, index, role, expected_artifact } = job.data;
    // A job in another role's queue was not dispatched by deepq (dispatch derives the queue from the role).
    if (job.queueName !== subagentQueueName(role)) return;
    if (!(await rt.goals.get(goalId))) return;
    await rt.goals.appendEvent(goalId, { type: 'subtask_failed', step, index, role, artifact: expected_artifact, reason: scrubSecrets(err.message, rt.secrets).slice(0, 300) });
  };
}
