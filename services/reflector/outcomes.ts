// A finished cycle's outcomes: each child's result, or its failure reason when it failed for
// good (a failed child never cancels its siblings: ignoreDependencyOnFailure).
import type { Job } from 'bullmq';
import type { CycleOutcome } from '../../shared/goal/progress.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { isFinishedBy, settleFailedArtifact } from '../../shared/goal/subtask-artifact.ts';
import type { SubagentJobResult } from '../../shared/runtime/jobs.ts';
import { subtaskJobId } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { cutText } from '../../shared/text.ts';

export interface SubtaskOutcome extends CycleOutcome {
  bytes?: number;
}

/** Child job ids end in `:<index>` (services/planner/dispatch.ts). */
const indexOf = (key: string) => Number(key.split(':').pop());

export async function collectOutcomes(rt: Runtime, job: Job, goal: GoalRecord): Promise<SubtaskOutcome[]> {
  const values = (await job.getChildrenValues()) as Record<string, SubagentJobResult>;
  // Failed children (ignoreDependencyOnFailure) are read only when some child left no value.
  const plan = goal.planStep === job.data.step ? goal.plan : null;
  const all = plan ? Object.keys(values).length >= plan.subtasks.length : false;
  const failures = all ? {} : ((await job.getIgnoredChildrenFailures()) as Record<string, string>);
  const byIndex = new Map<number, SubtaskOutcome>();
  for (const [key, v] of Object.entries(values)) {
    // A subtask stopped at its token cap returns what it had, marked partial (status active).
    const status = v.partial ? 'partial' : v.status === 'failed' ? 'failed' : 'done';
    const index = indexOf(key);
    byIndex.set(index, {
      index,
      role: v.role,
      artifact: v.artifact_name,
      status,
      reason: v.notes ?? undefined,
      bytes: v.bytes,
    });
  }
  for (const [key, reason] of Object.entries(failures)) {
    const index = indexOf(key);
    const t = goal.plan?.subtasks[index];
    const artifact = t?.expected_artifact ?? '?';
    byIndex.set(index, {
      index,
      role: t?.role ?? '?',
      artifact,
      status: 'failed',
      reason: cutText(String(reason), 300),
    });
  }
  await finishedDespiteFailure(rt, job, byIndex, failures);
  const outcomes = [...byIndex.values()].sort((a, b) => a.index - b.index);
  await recordFailures(rt, job, outcomes, failures);
  return outcomes;
}

/**
 * Each child that failed for good is on the timeline before the reflection's events: a failure
 * BullMQ made outside the processor (stalled too often) released this job at once, possibly
 * before the worker that saw it could record it; then it is recorded here (once, either way).
 */
async function recordFailures(
  rt: Runtime,
  job: Job,
  outcomes: SubtaskOutcome[],
  failures: Record<string, string>,
): Promise<void> {
  const { goalId, step } = job.data as { goalId: string; step: number };
  const failed = new Set(Object.keys(failures).map(indexOf));
  for (const o of outcomes) {
    if (o.status !== 'failed' || !failed.has(o.index)) continue;
    const { index, role, artifact, reason = '' } = o;
    await rt.goals.subtaskFailed(goalId, { type: 'subtask_failed', step, index, role, artifact, reason }, false);
    // Its tool-written draft is not left current over the done version it was to revise.
    const ref = { goalId, step, role, expected_artifact: artifact };
    if (artifact !== '?') await settleFailedArtifact(rt.vfs, ref, subtaskJobId(goalId, step, index));
  }
}

/**
 * A child that failed after its run recorded its artifact `done` (stalled too often once the
 * write was in) finished: it counts done, as its `subtask_finished` on the timeline says.
 */
async function finishedDespiteFailure(
  rt: Runtime,
  job: Job,
  byIndex: Map<number, SubtaskOutcome>,
  failures: Record<string, string>,
): Promise<void> {
  const keys = Object.keys(failures);
  if (keys.length === 0) return;
  const { goalId, step } = job.data as { goalId: string; step: number };
  const entries = await Promise.all(
    keys.map((key) => {
      const o = byIndex.get(indexOf(key))!;
      return o.artifact === '?' ? null : rt.vfs.stat(goalId, o.artifact);
    }),
  );
  keys.forEach((key, i) => {
    const o = byIndex.get(indexOf(key))!;
    // The artifact's writer is the child's job id, derived from the cycle and index (dispatch).
    const entry = entries[i];
    if (!isFinishedBy(entry, step, subtaskJobId(goalId, step, o.index))) return;
    byIndex.set(o.index, { ...o, status: 'done', reason: undefined, bytes: entry!.bytes });
  });
}
