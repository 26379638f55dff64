// The Redis key layout. Every key of a goal lives under `<prefix>:goal:<goalId>`.
import { GOAL_ID_PATTERN } from './ids.ts';

export class Keys {
  constructor(readonly prefix: string) {}
  goal(goalId: string): string {
    return `${this.prefix}:goal:${goalId}`;
  }
  /** Artifact metadata: name → JSON entry (never the content). */
  files(goalId: string): string {
    return `${this.goal(goalId)}:files`;
  }
  /** Inline artifact contents: name → content (spilled ones live in the blob store). */
  content(goalId: string): string {
    return `${this.goal(goalId)}:content`;
  }
  events(goalId: string): string {
    return `${this.goal(goalId)}:events`;
  }
  /** Sorted set of the goal's stored transcripts (thread ids by time), to cap their number. */
  threads(goalId: string): string {
    return `${this.goal(goalId)}:threads`;
  }
  transcript(goalId: string, threadId: string): string {
    return `${this.goal(goalId)}:thread:${threadId}`;
  }
  /** Approval requests of risky tool calls: callId → JSON record (shared/goal/approvals.ts). */
  approvals(goalId: string): string {
    return `${this.goal(goalId)}:approvals`;
  }
  /** Paused subagent runs waiting on approvals: job id → JSON checkpoint. */
  checkpoints(goalId: string): string {
    return `${this.goal(goalId)}:checkpoints`;
  }
  /** Tokens reserved by model calls in flight: `<id>:<tokens>` by expiry (shared/goal/budgets.ts). */
  reservations(goalId: string): string {
    return `${this.goal(goalId)}:reservations`;
  }
  /** Jobs parked while the goal waits for a bigger budget: job id → queue (shared/goal/parking.ts). */
  parked(goalId: string): string {
    return `${this.goal(goalId)}:parked`;
  }
  /** Earlier versions of revised artifacts: `<name>@<version>` → entry with its content. */
  history(goalId: string): string {
    return `${this.goal(goalId)}:history`;
  }
  /** Set (with the goal's TTL) by the reflector that counted the goal's cancel from the CLI or the inspector. */
  cancelCounted(goalId: string): string {
    return `${this.goal(goalId)}:cancel-counted`;
  }
  /** Every key a goal can own, transcripts aside (they are found by SCAN). */
  goalKeys(goalId: string): string[] {
    return [
      this.goal(goalId),
      this.files(goalId),
      this.content(goalId),
      this.events(goalId),
      this.threads(goalId),
      this.approvals(goalId),
      this.checkpoints(goalId),
      this.reservations(goalId),
      this.parked(goalId),
      this.history(goalId),
      this.cancelCounted(goalId),
    ];
  }
  goalPattern(goalId: string): string {
    return `${this.goal(goalId)}:*`;
  }
  /**
   * How many goals of an idempotency key the sweep has removed (its first goal's id names it): the
   * key's next goal takes the next id, never one whose BullMQ jobs may still be kept.
   */
  keyGeneration(firstGoalId: string): string {
    return `${this.prefix}:key-generation:${firstGoalId}`;
  }
  /** Held by the submission of a keyed goal under way (shared/runtime/lease.ts): one at a time. */
  keySubmission(goalId: string): string {
    return `${this.prefix}:key-submission:${goalId}`;
  }
  /** Held by a resume with files under way (shared/runtime/lease.ts): one at a time per goal. */
  resumeSubmission(goalId: string): string {
    return `${this.prefix}:resume-submission:${goalId}`;
  }
  /** Sorted set of goal ids by creation time (for `deepq goals` and the sweep). */
  goalsIndex(): string {
    return `${this.prefix}:goals`;
  }
  /** This deployment's id (made once): it claims the blob store, which another Redis must not sweep. */
  deployment(): string {
    return `${this.prefix}:deployment`;
  }
  /** Sorted set of the goals not yet ended, by creation time: what the reconciler looks at. */
  liveGoals(): string {
    return `${this.prefix}:goals:live`;
  }
  /** Sorted set of the goals that ended, by when: the sweep finds those past their retention here. */
  /** Goals a human ended (a cancel, an end as done) not yet counted by a reflector, scored by when. */
  uncountedEnds(): string {
    return `${this.prefix}:goals:uncounted-ends`;
  }
  endedGoals(): string {
    return `${this.prefix}:goals:ended`;
  }
  /** The sweep's census of the goal namespace: where its slices stopped, and its running byte counts. */
  sweepCensus(): string {
    return `${this.prefix}:sweep:census`;
  }
  /** Held by the run of a maintenance schedule under way (shared/runtime/lease.ts). */
  maintenanceLease(schedule: string): string {
    return `${this.prefix}:maintenance:lease:${schedule}`;
  }
  /** Set (with a day's TTL) once the reconciler rebuilt liveGoals from the index. */
  liveGoalsRebuilt(): string {
    return `${this.prefix}:goals:live:rebuilt`;
  }
  /** Sorted set of every pending approval, `<goalId>/<callId>` by when it times out. */
  approvalsPending(): string {
    return `${this.prefix}:approvals:pending`;
  }
  cancelChannel(): string {
    return `${this.prefix}:cancel`;
  }
}

/** `goal-<goalId>--<role>-<short>`, the seed's thread id shape. */
export function threadIdFor(goalId: string, role: string, short: string): string {
  return `goal-${goalId}--${role}-${short}`;
}

const THREAD_ID_RE = new RegExp(`^goal-(${GOAL_ID_PATTERN})--[a-z][a-z0-9-]*-[A-Za-z0-9]+$`);

export function goalIdFromThreadId(threadId: string): string | null {
  const m = THREAD_ID_RE.exec(threadId);
  return m ? m[1]! : null;
}
