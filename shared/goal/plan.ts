// What a goal records of each cycle: the plan (1-5 subtasks) and the reflection's decision.
// The services check model output against these (services/planner/plan-contract.ts,
// services/reflector/decision-contract.ts); the goal hash and the subtask jobs carry them.
import { z } from 'zod';
import { cutText } from '../text.ts';
import { ArtifactNameSchema } from '../vfs/artifact-name.ts';

export const MAX_SUBTASKS = 5;
/** The smallest token cap a plan may give a subtask: below it no call is worth making. */
export const MIN_TOKEN_CAP = 256;

export const SubtaskSchema = z.object({
  // A configured role name is at most 41 chars: a longer one is unknown, and is not quoted whole.
  role: z.string().min(1).max(64, 'role names are at most 41 characters'),
  instruction: z.string().min(1, 'instruction is empty').max(20_000),
  expected_artifact: ArtifactNameSchema,
  read_files: z.array(ArtifactNameSchema).max(20).default([]),
  /** Optional: the most tokens the subtask may use; the worker stops it there, partial. */
  token_cap: z.number().int().min(MIN_TOKEN_CAP).max(100_000_000).optional(),
});
export type Subtask = z.infer<typeof SubtaskSchema>;

const PLAN_SIZE = `a plan needs 1 to ${MAX_SUBTASKS} subtasks`;
export const PlanSchema = z.object({
  subtasks: z.array(SubtaskSchema).min(1, PLAN_SIZE).max(MAX_SUBTASKS, PLAN_SIZE),
});
export type Plan = z.infer<typeof PlanSchema>;

export const DECISIONS = ['continue', 'replan', 'end', 'escalate'] as const;
/** A reflection's reason, at most (characters): it is stored, shown and sent to the next plan. */
const REASON_MAX_CHARS = 2000;
export type Decision = (typeof DECISIONS)[number];
export const ReflectionSchema = z.object({
  decision: z.enum(DECISIONS),
  // Cut, not refused: a long reason refused a right decision (an `end`), and two in a row failed the goal.
  reason: z.string().transform((r) => (r.length > REASON_MAX_CHARS ? cutText(r, REASON_MAX_CHARS - 1) : r)),
  /** Done artifacts the next plan may rewrite (each becomes a new version; the old one stays in history). */
  revise: z.array(ArtifactNameSchema).max(MAX_SUBTASKS).optional(),
});
export type Reflection = z.infer<typeof ReflectionSchema>;
