// Goal ids: 12 hex characters when deepq makes one; 6-32 lower-case letters or digits accepted.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';

export const GOAL_ID_RE = /^[a-z0-9]{6,32}$/;
/** The same pattern without anchors, for composite patterns (blob refs, thread ids). */
export const GOAL_ID_PATTERN = '[a-z0-9]{6,32}';
export const GoalIdSchema = z.string().regex(GOAL_ID_RE, 'goal ids are 6-32 lower-case letters or digits');

/** A keyed goal's id length (an idempotency key's hash, cli/goal-submission.ts); deepq's own ids have 12. */
export const KEYED_GOAL_ID_LENGTH = 24;

export function isGoalId(value: string): boolean {
  return GOAL_ID_RE.test(value);
}

export function newGoalId(): string {
  return randomBytes(6).toString('hex');
}

// Operation ids (a goal transition's, a token reservation's): unique across processes by a
// random per-process tag, then a counter; no entropy read per call, which is on the hot path.
const PROCESS_TAG = randomBytes(6).toString('hex');
let operations = 0;
export function newOperationId(): string {
  operations += 1;
  return `${PROCESS_TAG}${operations.toString(36)}`;
}
