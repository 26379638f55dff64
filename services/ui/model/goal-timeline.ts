// A goal's cycles as the inspector shows them, folded from its timeline events: each cycle's
// subtasks (state, attempt, duration, bytes, tool calls, failure reason), its reflection and
// any pause or resume. The plan's instructions are not in the events; cycle-plans.ts adds them.
import type { TimelineEvent } from '../../../shared/goal/events.ts';
import type { Subtask } from '../../../shared/goal/plan.ts';

export type SubtaskState = 'planned' | 'queued' | 'running' | 'awaiting_approval' | 'done' | 'failed';

export interface SubtaskView {
  index: number;
  role: string;
  artifact: string;
  instruction?: string;
  readFiles?: string[];
  state: SubtaskState;
  attempt?: number;
  ms?: number;
  bytes?: number;
  reason?: string;
  threadId?: string;
  toolCalls: number;
  toolErrors: number;
  /** Ids of its tool calls waiting for a human (the Decisions block has their buttons). */
  awaiting?: string[];
}

export interface CycleView {
  step: number;
  plannerThreadId?: string;
  /** Where the instructions came from (goal, jobs, transcript), or absent when none is left. */
  planSource?: string;
  subtasks: SubtaskView[];
  reflection?: { decision: string; reason: string; threadId?: string };
  paused?: { pausedFor: string; reason: string };
  resumed?: { action: string; note?: string };
  evicted: string[];
}

type EventOf<T extends TimelineEvent['type']> = Extract<TimelineEvent, { type: T }>;

export class GoalTimeline {
  private readonly cycles = new Map<number, CycleView>();

  /** Every cycle, oldest first. */
  all(): CycleView[] {
    return [...this.cycles.values()].sort((a, b) => a.step - b.step);
  }

  get(step: number): CycleView | undefined {
    return this.cycles.get(step);
  }

  private cycle(step: number): CycleView {
    let c = this.cycles.get(step);
    if (!c) {
      c = { step, subtasks: [], evicted: [] };
      this.cycles.set(step, c);
    }
    return c;
  }

  /** Applies one event; returns the step of the cycle it changed, if any. */
  apply(e: TimelineEvent): number | undefined {
    switch (e.type) {
      case 'planned':
      case 'dispatched':
        this.applyPlan(e);
        return e.step;
      case 'subtask_started':
      case 'subtask_finished':
      case 'subtask_failed':
        this.applySubtask(e);
        return e.step;
      case 'tool_called':
        this.applyToolCall(e);
        return e.step;
      case 'approval_requested':
      case 'approval_decided':
        this.applyApproval(e);
        return e.step;
      case 'evicted':
        this.cycle(e.step).evicted.push(e.name);
        return e.step;
      case 'reflected':
        this.cycle(e.step).reflection = { decision: e.decision, reason: e.reason, threadId: e.threadId };
        return e.step;
      case 'paused':
        this.cycle(e.step).paused = { pausedFor: e.pausedFor, reason: e.reason };
        return e.step;
      case 'resumed':
        this.cycle(e.step).resumed = { action: e.action, ...(e.note ? { note: e.note } : {}) };
        return e.step;
      default:
        return undefined;
    }
  }

  /** Adds the plan's own words (instruction, read_files) to a cycle's subtasks. */
  attachPlan(step: number, subtasks: Subtask[], source: string): void {
    const c = this.cycle(step);
    c.planSource = source;
    subtasks.forEach((t, index) => {
      const s = this.subtask(c, index, t.role, t.expected_artifact);
      s.instruction = t.instruction;
      s.readFiles = t.read_files;
    });
  }

  private subtask(c: CycleView, index: number, role: string, artifact: string): SubtaskView {
    let s = c.subtasks.find((x) => x.index === index);
    if (!s) {
      s = { index, role, artifact, state: 'planned', toolCalls: 0, toolErrors: 0 };
      c.subtasks.push(s);
      c.subtasks.sort((a, b) => a.index - b.index);
    }
    return s;
  }

  private applyPlan(e: EventOf<'planned' | 'dispatched'>): void {
    const c = this.cycle(e.step);
    if (e.type === 'planned') c.plannerThreadId = e.threadId;
    // `planned` lists subtasks in plan order; `dispatched` names each one's index.
    e.subtasks.forEach((t: { role: string; artifact: string; index?: number }, i) => {
      const index = t.index ?? i;
      const s = this.subtask(c, index, t.role, t.artifact);
      if (e.type === 'dispatched' && s.state === 'planned') s.state = 'queued';
    });
  }

  private applySubtask(e: EventOf<'subtask_started' | 'subtask_finished' | 'subtask_failed'>): void {
    const s = this.subtask(this.cycle(e.step), e.index, e.role, e.artifact);
    if (e.threadId) s.threadId = e.threadId;
    if (e.type === 'subtask_started') {
      s.state = 'running';
      s.attempt = e.attempt;
      // A new attempt runs a new agent: its tool calls are its own.
      s.toolCalls = 0;
      s.toolErrors = 0;
      return;
    }
    s.state = e.type === 'subtask_finished' ? 'done' : 'failed';
    if (e.ms !== undefined) s.ms = e.ms;
    if (e.bytes !== undefined) s.bytes = e.bytes;
    if (e.reason) s.reason = e.reason;
  }

  /** A subtask waits while any of its calls does. */
  private applyApproval(e: EventOf<'approval_requested' | 'approval_decided'>): void {
    const s = this.subtask(this.cycle(e.step), e.index, e.role, '');
    const waiting = new Set(s.awaiting ?? []);
    if (e.type === 'approval_requested') waiting.add(e.callId);
    else waiting.delete(e.callId);
    s.awaiting = [...waiting];
    if (s.state === 'running' || s.state === 'awaiting_approval')
      s.state = waiting.size ? 'awaiting_approval' : 'running';
  }

  private applyToolCall(e: EventOf<'tool_called'>): void {
    if (e.index === undefined) return;
    const s = this.cycle(e.step).subtasks.find((x) => x.index === e.index);
    if (!s) return;
    s.toolCalls++;
    if (!e.ok) s.toolErrors++;
  }
}
