// Every boundary's shape, in zod: the plan and reflection the models return, the
// SubagentResult handoff, the goal request, and each job payload.
import { z } from 'zod';
import { ValidationError } from './errors.ts';
import { formatZodIssues } from './runtime/config.ts';

export const GOAL_ID_RE = /^[a-z0-9]{6,32}$/;
export const GoalIdSchema = z.string().regex(GOAL_ID_RE, 'goal ids are 6-32 lower-case letters or digits');

/** Artifact names: a safe character set, ≤ 200 chars, no `..`, no leading `/`, no control chars. */
export const ARTIFACT_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,199}$/;
export function artifactNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return 'artifact name must be a string';
  if (name.length === 0) return 'artifact name is empty';
  if (name.length > 200) return `artifact name is ${name.length} chars (max 200)`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'artifact name contains control characters';
  if (name.startsWith('/')) return `artifact name ${JSON.stringify(name)} starts with "/"`;
  if (name.split('/').includes('..') || name.includes('..')) return `artifact name ${JSON.stringify(name)} contains ".."`;
  if (!ARTIFACT_NAME_RE.test(name)) return `artifact name ${JSON.stringify(name)} has characters outside [A-Za-z0-9_.-/]`;
  return null;
}
export const ArtifactNameSchema = z.string().superRefine((name, ctx) => {
  const problem = artifactNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const SubtaskSchema = z.object({
  role: z.string().min(1),
  instruction: z.string().min(1, 'instruction is empty').max(20_000),
  expected_artifact: ArtifactNameSchema,
  read_files: z.array(ArtifactNameSchema).max(20).default([]),
});
export type Subtask = z.infer<typeof SubtaskSchema>;

export const PlanSchema = z.object({
  subtasks: z.array(SubtaskSchema).min(1, 'a plan needs 1 to 5 subtasks').max(5, 'a plan needs 1 to 5 subtasks'),
});
export type Plan = z.infer<typeof PlanSchema>;

/** The plan's shape plus the rules that need context: known roles, unique names, existing files. */
export function planSchemaFor(knownRoles: string[], existingFiles: string[]) {
  const files = new Set(existingFiles);
  return PlanSchema.superRefine((plan, ctx) => {
    const seen = new Set<string>();
    plan.subtasks.forEach((t, i) => {
      if (!knownRoles.includes(t.role)) {
        ctx.addIssue({ code: 'custom', path: ['subtasks', i, 'role'], message: `unknown role ${JSON.stringify(t.role)} (known: ${knownRoles.join(', ')})` });
      }
      if (seen.has(t.expected_artifact)) {
        ctx.addIssue({ code: 'custom', path: ['subtasks', i, 'expected_artifact'], message: `duplicate artifact name ${JSON.stringify(t.expected_artifact)}` });
      }
      seen.add(t.expected_artifact);
      t.read_files.forEach((f, j) => {
        if (!files.has(f)) {
          ctx.addIssue({ code: 'custom', path: ['subtasks', i, 'read_files', j], message: `read_files names ${JSON.stringify(f)}, which does not exist` });
        }
      });
    });
  });
}

export const DECISIONS = ['continue', 'replan', 'end', 'escalate'] as const;
export const ReflectionSchema = z.object({
  decision: z.enum(DECISIONS),
  reason: z.string().max(2000),
});
export type Reflection = z.infer<typeof ReflectionSchema>;

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
});
export type SubagentJobResult = z.infer<typeof SubagentJobResultSchema>;

export const GoalRequestSchema = z.object({
  goal: z
    .string()
    .refine((s) => s.trim().length > 0, 'goal text is empty')
    .refine((s) => Buffer.byteLength(s, 'utf8') <= 100 * 1024, 'goal text is over 100 KB')
    // eslint-disable-next-line no-control-regex
    .refine((s) => !/[\u0000-\u0008\u000e-\u001f\ufffd]/.test(s), 'goal text looks binary (control or invalid UTF-8 bytes)'),
  budgets: z
    .object({
      maxTokens: z.number().int().positive().optional(),
      maxSteps: z.number().int().positive().optional(),
      maxSeconds: z.number().positive().optional(),
    })
    .default({}),
  review: z.boolean().default(false),
});
export type GoalRequest = z.infer<typeof GoalRequestSchema>;

export const StepSchema = z.number().int().min(1).max(10_000);

export const PlanJobSchema = z.object({
  goalId: GoalIdSchema,
  step: StepSchema,
});
export type PlanJob = z.infer<typeof PlanJobSchema>;

export const SubagentJobSchema = z.object({
  goalId: GoalIdSchema,
  step: StepSchema,
  index: z.number().int().min(0).max(4),
  role: z.string().min(1),
  instruction: z.string().min(1),
  expected_artifact: ArtifactNameSchema,
  read_files: z.array(ArtifactNameSchema).default([]),
});
export type SubagentJob = z.infer<typeof SubagentJobSchema>;

export const ReflectJobSchema = z.object({
  goalId: GoalIdSchema,
  step: StepSchema,
});
export type ReflectJob = z.infer<typeof ReflectJobSchema>;

/** Parse or throw a ValidationError that names each bad field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(`invalid ${what}: ${formatZodIssues(r.error)}`);
  return r.data;
}

/** Extract the JSON value from model text (bare JSON or one fenced ```json block). */
export function extractJson(text: string): unknown {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n```$/.exec(trimmed);
  const body = fenced ? fenced[1]! : trimmed;
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new ValidationError(`output is not valid JSON: ${(err as Error).message}`);
  }
}

export const TERMINAL_STATUSES = ['done', 'failed', 'cancelled', 'budget_exceeded'] as const;
export const GOAL_STATUSES = ['queued', 'planning', 'running', 'reflecting', 'awaiting_human', ...TERMINAL_STATUSES] as const;
export type GoalStatus = (typeof GOAL_STATUSES)[number];
export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}
