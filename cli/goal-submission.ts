// An idempotent submission: the goal id an idempotency key stands for, and the fingerprint that
// tells the same request sent again from another one under the same key.
import { createHash } from 'node:crypto';
import { KEYED_GOAL_ID_LENGTH } from '../shared/goal/ids.ts';
import type { GoalRequest } from './goal-request.ts';

/** Who wrote a goal's input files: the VFS's writer id (a subtask's is `<goalId>:<step>:<index>`). */
export const INPUT_WRITER = 'input';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * A keyed goal's id: 24 hex characters of the key's SHA-256 (a goal id deepq makes has 12): one
 * goal per key in a deployment, for as long as the goal is kept. After the sweep removed the
 * key's goal `generation` times, the next one has an id of its own: the jobs of the one swept
 * (job ids start with the goal id) may still be kept, and a job id BullMQ already holds is not
 * added again.
 */
export function goalIdForKey(key: string, generation = 0): string {
  return sha256(`deepq-goal-key:${key}${generation ? `:${generation}` : ''}`).slice(0, KEYED_GOAL_ID_LENGTH);
}

/** What the request asks for, as given (not the budgets' defaults, which a deployment may change). */
export function requestFingerprint(req: GoalRequest): string {
  const files = req.files.map((f) => [f.name, sha256(f.content)]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
  const budgets = Object.fromEntries(
    Object.entries(req.budgets)
      .filter(([, v]) => v !== undefined)
      .sort(),
  );
  return sha256(JSON.stringify({ goal: req.goal, budgets, review: req.review, files }));
}
