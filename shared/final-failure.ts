// What happens when a job fails for good: a plan or reflect job fails the goal with the
// reason; a subtask's failure is recorded and reflection goes on without it.
import type { Job } from 'bullmq';
import type { Runtime } from './runtime.ts';
import { scrubSecrets } from './logger.ts';

export function failGoalOnFinalFailure(rt: Runtime, what: string) {
  return async (job: Job, err: Error): Promise<void> => {
    const goalId = job.data?.goalId;
    if (typeof goalId !== 'string') return;
    const reason = `${what} failed: ${scrubSecrets(err.message, rt.secrets)}`.slice(0, 1000);
    if (await rt.goals.transition(goalId, { to: 'failed', fields: { reason }, event: { type: 'finished', status: 'failed', step: job.data?.step, reason } })) {
      rt.metrics.goals.inc({ status: 'failed' });
    }
  };
}

export function recordSubtaskFailure(rt: Runtime) {
  return async (job: Job, err: Error): Promise<void> => {
    const { goalId, step, index, role, expected_artifact } = job.data ?? {};
    if (typeof goalId !== 'string' || !(await rt.goals.get(goalId))) return;
    await rt.goals.appendEvent(goalId, { type: 'subtask_failed', step, index, role, artifact: expected_artifact, reason: scrubSecrets(err.message, rt.secrets).slice(0, 300) });
  };
}
