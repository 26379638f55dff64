// Small zod helpers every boundary uses: one way to name bad fields, one way to parse.
import { z } from 'zod';
import { ValidationError } from './errors.ts';
import { wellFormedDeep } from './text.ts';

/**
 * Issues shown at most: a model's answer of 5,000 empty items made 5,000 issues, a ~1 MB
 * reminder sent back to it (past its context window) and a failure reason as long.
 */
const ISSUES_SHOWN = 10;

/** Each issue as `path: message`; `nameOf` may add a name for a path (the env var that set it). */
export function formatZodIssues(error: z.ZodError, nameOf: (path: string) => string | undefined = () => undefined) {
  const shown = error.issues.slice(0, ISSUES_SHOWN).map((i) => {
    const path = i.path.join('.');
    const name = nameOf(path);
    return `${path || '(root)'}${name ? ` (${name})` : ''}: ${issueMessage(i)}`;
  });
  const more = error.issues.length - shown.length;
  return more > 0 ? `${shown.join('; ')}; and ${more} more` : shown.join('; ');
}

/** A record key's issue says what the key must be, not zod's "Invalid key in record". */
function issueMessage(i: z.core.$ZodIssue): string {
  if (i.code !== 'invalid_key' || !i.issues.length) return i.message;
  return `not a valid key: ${i.issues.map((inner) => inner.message).join('; ')}`;
}

/** Parse or throw a ValidationError that names each bad field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(`invalid ${what}: ${formatZodIssues(r.error)}`);
  return r.data;
}

/** Extract the JSON value from model text (bare JSON or one fenced block: ```json, ```JSON, ```jsonc, ```). */
export function extractJson(text: string): unknown {
  const trimmed = text.trim();
  const fenced = /^```[\w-]*[ \t]*\n([\s\S]*?)\n```$/.exec(trimmed);
  const body = fenced ? fenced[1]! : trimmed;
  try {
    // A `\ud83d` escape alone would be half an emoji in every string the answer hands on.
    const value: unknown = JSON.parse(body.toWellFormed());
    return body.includes('\\u') ? wellFormedDeep(value) : value;
  } catch (err) {
    // V8 quotes the bad token as one UTF-16 unit: half of an emoji that starts the answer.
    throw new ValidationError(`output is not valid JSON: ${(err as Error).message.toWellFormed()}`);
  }
}

/** Node's timers hold at most 2^31 - 1 ms (24.8 days): a longer one fires after 1 ms instead. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration in ms that a timer is set to: a positive integer a timer can hold, with `headroom`
 * left for a margin added to it (a hard stop a while after a drain).
 */
export const timerMs = (headroom = 0) =>
  z
    .number()
    .int()
    .positive()
    .max(
      MAX_TIMER_MS - headroom,
      headroom
        ? `at most ${MAX_TIMER_MS - headroom} ms (the longest a timer waits, less ${headroom} ms of margin)`
        : `at most ${MAX_TIMER_MS} ms (24.8 days: the longest a timer waits)`,
    );
