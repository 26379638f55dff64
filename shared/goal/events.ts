// The goal timeline: one typed variant per event. The writers (lifecycle, services, the
// vfsEvict script) and the readers (`watch`, the timeline view, tests) share these types.
import type { ApprovalDecisionStatus } from '../agent/approval.ts';
import type { BudgetKind } from '../errors.ts';
import { wellFormedStrings } from '../text.ts';
import type { Decision } from './plan.ts';
import type { TerminalStatus } from './status.ts';

export interface SubtaskRef {
  index: number;
  role: string;
  artifact: string;
}

/** Why a goal waits for a human: a review, an escalation (a stall's too), or a budget to raise. */
export type PausedFor = 'review' | 'escalation' | 'budget';

/** What the reflector does about a stall: escalate to a human, or end the goal `failed`. */
export type StallAction = 'escalate' | 'fail';

export interface SubtaskOutcomeRef {
  index: number;
  /** `partial`: stopped at its token cap with what it had. */
  status: 'done' | 'failed' | 'partial';
}

/** Which call of which subtask an approval event is about. */
export interface ApprovalRef {
  step: number;
  index: number;
  role: string;
  threadId: string;
  /** deepq's id of the call (`ap-…`), what `deepq approve|reject` take. */
  callId: string;
  /** The configured tool name. */
  tool: string;
}

/** How a subtask ended; a failure recorded after the job failed for good has only a reason. */
interface SubtaskEnd {
  threadId?: string;
  bytes?: number;
  ms?: number;
  reason?: string;
  /** The subtask stopped at its token cap: its artifact holds what it had, status `active`. */
  partial?: boolean;
  /**
   * Every token (input, output, cache) of the job's model calls (across its approval pauses; a failed
   * attempt's own). Absent in events written before deepq recorded it, or when unknown.
   */
  tokens?: number;
}

export type TimelineEventBody =
  | {
      type: 'created';
      goal: string;
      /** The files the goal started with (`enqueue --file`), each an artifact before the first plan. */
      inputs?: { name: string; bytes: number }[];
    }
  | { type: 'planned'; step: number; threadId: string; subtasks: Omit<SubtaskRef, 'index'>[] }
  | { type: 'dispatched'; step: number; subtasks: SubtaskRef[]; redelivered?: boolean }
  | (SubtaskRef & {
      type: 'subtask_started';
      step: number;
      threadId: string;
      attempt: number;
      /** The same attempt delivered again: its earlier run did not finish (killed worker, lost lock, shutdown). */
      restarted?: true;
    })
  | (SubtaskRef & { type: 'subtask_finished'; step: number } & SubtaskEnd)
  | (SubtaskRef & { type: 'subtask_failed'; step: number } & SubtaskEnd)
  | {
      /** One tool call of a subagent: which tool, how long, whether it succeeded; never its input or output. */
      type: 'tool_called';
      step: number;
      index?: number;
      role: string;
      threadId: string;
      /** The configured tool name, or `unknown` for a name the model made up. */
      tool: string;
      ms: number;
      ok: boolean;
      /** An at-most-once call whose run died while it ran: not made again, its outcome unknown. */
      unknown?: true;
    }
  | (ApprovalRef & {
      /** A subagent's call waits for a human (`deepq approve|reject <goalId> <callId>`). */
      type: 'approval_requested';
      /** The call's input as JSON, cut at about 300 chars: written by the model, untrusted. */
      input: string;
      expiresAt: number;
    })
  | (ApprovalRef & { type: 'approval_decided'; decision: ApprovalDecisionStatus; reason?: string })
  | { type: 'evicted'; step: number; name: string; reason: string }
  | {
      type: 'reflected';
      step: number;
      decision: Decision;
      reason: string;
      threadId?: string;
      outcomes: SubtaskOutcomeRef[];
    }
  | {
      /** K cycles in a row without progress: the reflector acted without asking the model. */
      type: 'stalled';
      step: number;
      cycles: number;
      reason: string;
      action: StallAction;
    }
  | { type: 'paused'; step: number; pausedFor: PausedFor; reason: string; decision?: Decision; budget?: BudgetKind }
  | {
      type: 'resumed';
      step: number;
      action: string;
      note?: string;
      /** Budgets a human raised with the resume. */
      budgets?: { maxTokens?: number; maxSteps?: number; maxSeconds?: number };
      /** Files a human gave with the resume (inputs from then on). */
      inputs?: { name: string; bytes: number }[];
    }
  | { type: 'finished'; status: TerminalStatus; step?: number; reason?: string };

export type TimelineEventType = TimelineEventBody['type'];
/** An event as stored: the body plus when it happened (ms). */
export type TimelineEvent = TimelineEventBody & { at: number };
/** An event as its stream stores it (the `e` field): the body stamped with `at`. */
export function storedEvent(event: TimelineEventBody, at = Date.now()): string {
  const json = JSON.stringify({ ...event, at });
  // A lone surrogate (half an emoji in a quoted or cut reason) is stored as a `\ud83d` escape,
  // which Redis's cjson refuses: a script reading the stream back would fail for good.
  return json.includes('\\u') ? JSON.stringify({ ...event, at }, wellFormedStrings) : json;
}
export interface TimelineEntry {
  /** The stream id, for reading on from here. */
  id: string;
  event: TimelineEvent;
}

export function subtaskRefs(plan: { subtasks: { role: string; expected_artifact: string }[] }): SubtaskRef[] {
  return plan.subtasks.map((t, index) => ({ index, role: t.role, artifact: t.expected_artifact }));
}
