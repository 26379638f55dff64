// What a producer submits: the goal text, its budgets and whether a human reviews each cycle.
import { z } from 'zod';
import { BudgetsSchema } from '../shared/goal/budgets.ts';

// C0 controls but tab and line breaks, DEL and C1 (a terminal acts on them), invalid UTF-8.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const BINARY_TEXT = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f\ufffd]/;

/** The largest goal text: 100 KB of UTF-8. */
export const GOAL_MAX_BYTES = 100 * 1024;

export const GoalRequestSchema = z.object({
  goal: z
    .string()
    .refine((s) => s.trim().length > 0, 'goal text is empty')
    .refine((s) => Buffer.byteLength(s, 'utf8') <= GOAL_MAX_BYTES, 'goal text is over 100 KB')
    .refine((s) => !BINARY_TEXT.test(s), 'goal text looks binary (control or invalid UTF-8 bytes)'),
  budgets: BudgetsSchema.default({}),
  review: z.boolean().default(false),
});
export type GoalRequest = z.infer<typeof GoalRequestSchema>;
