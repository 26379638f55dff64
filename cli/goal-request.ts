// What a producer submits: the goal text, its budgets, whether a human reviews each cycle, the
// files its agents start with, and an idempotency key (the same request sent again: one goal).
import { z } from 'zod';
import { BudgetsSchema } from '../shared/goal/budgets.ts';
import { ArtifactNameSchema } from '../shared/vfs/artifact-name.ts';

// C0 controls but tab and line breaks, DEL and C1 (a terminal acts on them), invalid UTF-8.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const BINARY_TEXT = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f\ufffd]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;

/** The largest goal text: 100 KB of UTF-8. */
export const GOAL_MAX_BYTES = 100 * 1024;
/** The longest idempotency key. */
export const KEY_MAX_CHARS = 200;

/** A file the goal's agents start with: an artifact of the goal before its first plan. */
export const InputFileSchema = z.object({
  name: ArtifactNameSchema,
  // Artifacts are text; a NUL is how binary content shows (UTF-8 was checked where it was read).
  content: z.string().refine((s) => !s.includes('\u0000'), 'content looks binary (a NUL byte)'),
});
export type InputFile = z.infer<typeof InputFileSchema>;

/** Why an input file of `size` bytes is refused before it is read, or null (DEEPQ_MAX_ARTIFACT_BYTES). */
export function inputSizeProblem(size: number, maxBytes: number): string | null {
  return size > maxBytes ? `is ${size} bytes (an artifact holds at most ${maxBytes})` : null;
}

/** An input file's bytes as text, or why they are not: artifacts are UTF-8 text. */
export function inputText(bytes: Uint8Array): { text: string } | { problem: string } {
  if (bytes.includes(0)) return { problem: 'looks binary (a NUL byte): artifacts are text' };
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    return { problem: 'is not UTF-8 text: artifacts are text' };
  }
}

export const GoalRequestSchema = z.object({
  goal: z
    .string()
    .refine((s) => s.trim().length > 0, 'goal text is empty')
    .refine((s) => Buffer.byteLength(s, 'utf8') <= GOAL_MAX_BYTES, 'goal text is over 100 KB')
    .refine((s) => !BINARY_TEXT.test(s), 'goal text looks binary (control or invalid UTF-8 bytes)'),
  budgets: BudgetsSchema.default({}),
  review: z.boolean().default(false),
  files: z
    .array(InputFileSchema)
    .default([])
    .refine((fs) => new Set(fs.map((f) => f.name)).size === fs.length, 'two input files have the same name'),
  key: z
    .string()
    .min(1, 'the idempotency key is empty')
    .max(KEY_MAX_CHARS, `the idempotency key is over ${KEY_MAX_CHARS} characters`)
    .refine((s) => !CONTROL_CHARS.test(s), 'the idempotency key has control characters')
    .optional(),
});
export type GoalRequest = z.infer<typeof GoalRequestSchema>;
/** What a producer passes (GoalClient.submit): the request before its defaults. */
export type GoalSubmission = z.input<typeof GoalRequestSchema>;
