// The stall detector's progress record, after Magentic-One's progress ledger: per reflected
// cycle, how many subtasks ended `done`, which failures happened (normalised) and a signature
// of the plan. It lives in the goal hash (`progress`, the last PROGRESS_KEPT cycles), written
// with the reflection's decision in one transition: a re-delivered reflect job recomputes the
// same entry for its step and replaces it, never appends a second. A cycle makes progress when
// it finishes something and does not repeat a cycle that did too (madeProgress); after `cycles` cycles in a
// row without progress the reflector stops asking the model and escalates (or fails) with a
// reason naming what repeated.
import { createHash } from 'node:crypto';
import type { Plan } from './plan.ts';

/** A subtask of a reflected cycle, as the next planner and the progress record see it. */
export interface CycleOutcome {
  index: number;
  role: string;
  artifact: string;
  /** `partial`: stopped at its token cap, with what it had written so far. */
  status: 'done' | 'failed' | 'partial';
  reason?: string;
}

export interface ProgressEntry {
  step: number;
  /** Subtasks of the cycle that ended `done`. */
  done: number;
  /** The cycle's failure reasons, normalised (numbers masked), at most MAX_FAILURES. */
  failures: string[];
  /** A hash of the cycle's plan: equal plans, equal signatures. */
  plan: string;
}

export const PROGRESS_KEPT = 10;
const MAX_FAILURES = 5;
const FAILURE_CHARS = 160;

export function planSignature(plan: Pick<Plan, 'subtasks'> | null): string {
  const tasks = (plan?.subtasks ?? []).map((t) => [t.role, t.instruction, t.expected_artifact, t.read_files]);
  return createHash('sha256').update(JSON.stringify(tasks)).digest('hex').slice(0, 12);
}

/** A failure reason with what varies between attempts (numbers, spacing) masked. */
export function failureSignature(reason: string): string {
  return reason.replace(/\d+/g, '#').replace(/\s+/g, ' ').trim().slice(0, FAILURE_CHARS);
}

export function progressEntry(
  step: number,
  plan: Pick<Plan, 'subtasks'> | null,
  outcomes: CycleOutcome[],
): ProgressEntry {
  const failures = outcomes
    .filter((o) => o.status === 'failed')
    .map((o) => failureSignature(o.reason ?? 'failed'))
    .slice(0, MAX_FAILURES);
  return { step, done: outcomes.filter((o) => o.status === 'done').length, failures, plan: planSignature(plan) };
}

/** The record with `entry` in place of any earlier one for its step, oldest first, bounded. */
export function recordProgress(record: ProgressEntry[], entry: ProgressEntry): ProgressEntry[] {
  const kept = record.filter((e) => e.step !== entry.step);
  return [...kept, entry].sort((a, b) => a.step - b.step).slice(-PROGRESS_KEPT);
}

/**
 * Finishing something is progress unless it repeats the cycle before, which also finished
 * things (churn on one artifact). The same plan finishing after a cycle that finished nothing
 * (stopped at its caps, or paused at the budget and resumed) is progress.
 */
export function madeProgress(entry: ProgressEntry, previous?: ProgressEntry): boolean {
  if (entry.done === 0) return false;
  return entry.plan !== previous?.plan || previous.done === 0;
}

/**
 * `stalled: …` when the last `cycles` cycles (consecutive) all went without progress, naming
 * what repeated; null otherwise, or when `cycles` is 0 (detection off).
 */
export function stallReason(record: ProgressEntry[], cycles: number): string | null {
  if (cycles <= 0 || record.length < cycles) return null;
  const last = record.slice(-cycles);
  for (const [i, e] of last.entries()) {
    const previous = record[record.length - cycles + i - 1];
    if (i > 0 && e.step !== last[i - 1]!.step + 1) return null;
    if (madeProgress(e, previous)) return null;
  }
  const what: string[] = [];
  if (last.every((e) => e.done === 0)) what.push('no subtask finished');
  const failure = mostRepeated(last.flatMap((e) => [...new Set(e.failures)]));
  if (failure) what.push(`the same failure ${failure.count}×: "${failure.value}"`);
  const plans = mostRepeated(last.map((e) => e.plan));
  if (plans) what.push(`the same plan ${plans.count}×`);
  const span = `cycles ${last[0]!.step}-${last[last.length - 1]!.step}`;
  return `stalled: ${cycles} cycles without progress (${span}): ${what.join('; ') || 'nothing new'}`;
}

/** The value seen most often, if it was seen at least twice. */
function mostRepeated(values: string[]): { value: string; count: number } | null {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best: { value: string; count: number } | null = null;
  for (const [value, count] of counts) if (count >= 2 && count > (best?.count ?? 0)) best = { value, count };
  return best;
}
