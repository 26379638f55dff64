// Job payloads and results, one schema per queue. Every worker parses its payload first: a
// malformed job (written by something other than deepq) fails alone, naming the bad field.
import { UnrecoverableError } from 'bullmq';
import { z } from 'zod';
import type { TimelineEventBody } from '../goal/events.ts';
import { GoalIdSchema } from '../goal/ids.ts';
import type { JobStart } from '../goal/lifecycle.ts';
import { MAX_SUBTASKS } from '../goal/plan.ts';
import type { GoalBrief, GoalStore } from '../goal/store.ts';
import { ArtifactNameSchema } from '../vfs/artifact-name.ts';
import { parseOrThrow } from '../zod.ts';

export const StepSchema = z.number().int().min(1).max(10_000);

export const PlanJobSchema = z.object({ goalId: GoalIdSchema, step: StepSchema });
export type PlanJob = z.infer<typeof PlanJobSchema>;

export const ReflectJobSchema = z.object({ goalId: GoalIdSchema, step: StepSchema });
export type ReflectJob = z.infer<typeof ReflectJobSchema>;

export const SubagentJobSchema = z.object({
  goalId: GoalIdSchema,
  step: StepSchema,
  index: z
    .number()
    .int()
    .min(0)
    .max(MAX_SUBTASKS - 1),
  role: z.string().min(1),
  instruction: z.string().min(1),
  expected_artifact: ArtifactNameSchema,
  read_files: z.array(ArtifactNameSchema).default([]),
  token_cap: z.number().int().positive().optional(),
});
export type SubagentJob = z.infer<typeof SubagentJobSchema>;

export const SUBAGENT_STATUSES = ['active', 'done', 'failed'] as const;
export const SubagentResultSchema = z.object({
  artifact_name: ArtifactNameSchema,
  content: z.string(),
  status: z.enum(SUBAGENT_STATUSES).default('active'),
  notes: z.string().max(200).nullable().default(null),
});
export type SubagentResult = z.infer<typeof SubagentResultSchema>;

/** What a subagent job returns: the SubagentResult without its content, plus bookkeeping. */
export const SubagentJobResultSchema = SubagentResultSchema.omit({ content: true }).extend({
  role: z.string(),
  threadId: z.string(),
  bytes: z.number().int().nonnegative(),
  startedAt: z.number(),
  finishedAt: z.number(),
  skipped: z.string().optional(),
  /** Stopped at its token cap: the artifact (status `active`) holds what it had. */
  partial: z.boolean().optional(),
});
export type SubagentJobResult = z.infer<typeof SubagentJobResultSchema>;

/**
 * A job's payload, parsed; a malformed one fails at once and for good (no retries), naming
 * each bad field, and never touches the goal it names.
 */
export function parseJobData<T>(schema: z.ZodType<T>, data: unknown, what: string): T {
  try {
    return parseOrThrow(schema, data, what);
  } catch (err) {
    throw new UnrecoverableError((err as Error).message);
  }
}

/** A job's start on the goal it names, which must exist: a job of an unknown goal fails for good. */
export function startedOf(start: JobStart | null, goalId: string): JobStart {
  if (!start) throw new UnrecoverableError(`unknown goal id: ${goalId}`);
  return start;
}

/**
 * What a subtask job reads of its goal (GoalStore.getBrief); with `started`, its
 * subtask_started event lands in the same script (GoalStore.startSubtask). Unknown goals fail
 * for good.
 */
export async function goalBriefOfJob(
  goals: GoalStore,
  goalId: string,
  started?: TimelineEventBody,
): Promise<GoalBrief> {
  const goal = started ? await goals.startSubtask(goalId, started) : await goals.getBrief(goalId);
  if (!goal) throw new UnrecoverableError(`unknown goal id: ${goalId}`);
  return goal;
}
