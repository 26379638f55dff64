// A subtask that failed for good is recorded on the goal's timeline while its cycle runs (once
// the cycle's reflection began, the reflector records it: services/reflector/outcomes.ts); the
// reflection goes on without it (a failed child never cancels its siblings).
import type { Job } from 'bullmq';
import { finishedArtifact, settleFailedArtifact } from '../../shared/goal/subtask-artifact.ts';
import { SubagentJobSchema } from '../../shared/runtime/jobs.ts';
import { scrubSecrets } from '../../shared/runtime/logger.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { cutText } from '../../shared/text.ts';
import { runTokensOf } from './run-tokens.ts';

export function recordSubtaskFailure(rt: Runtime) {
  return async (job: Job, err: Error): Promise<void> => {
    const parsed = SubagentJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    const { goalId, step, index, role, expected_artifact } = parsed.data;
    // A job in another role's queue was not dispatched by deepq (dispatch derives the queue from the role).
    if (job.queueName !== subagentQueueName(role)) return;
    // A resumed run that failed for good leaves no pause behind.
    await rt.approvals.clearCheckpoint(goalId, String(job.id));
    // Its run recorded the artifact (and subtask_finished) before the job failed (stalled too often).
    if (await finishedArtifact(rt.vfs, parsed.data, String(job.id))) return;
    const reason = cutText(scrubSecrets(err.message, rt.secrets), 300);
    const tokens = runTokensOf(err);
    const event = { type: 'subtask_failed' as const, step, index, role, artifact: expected_artifact, reason };
    await rt.goals.subtaskFailed(goalId, tokens === undefined ? event : { ...event, tokens }, true);
    await settleFailedArtifact(rt.vfs, parsed.data, String(job.id));
  };
}
