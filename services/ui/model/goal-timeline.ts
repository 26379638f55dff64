// A goal's cycles as the inspector shows them, folded from its timeline events: each cycle's
// subtasks (state, attempt, duration, tokens, bytes, tool calls, failure reason), its reflection, a
// stall, and any pause or resume. The plan's instructions and token caps are not in the
// events; cycle-plans.ts adds them. Wording shared by the page and the live script is made
// here, so the two render the same strings.
import type { TimelineEvent } from '../../../shared/goal/events.ts';
import type { Subtask } from '../../../shared/goal/plan.ts';
import { count } from '../views/format.ts';

/**
 * `partial`: stopped at its token cap, its artifact holding what it had (not `done`).
 * `parked`: queued or running when its goal paused at a budget; its job waits for the raise.
 * `stopped`: still open when its goal ended (a cancel, a budget end); its job stopped unrecorded.
 */
export type SubtaskState =
  | 'planned'
  | 'queued'
  | 'running'
  | 'awaiting_approval'
  | 'parked'
  | 'stopped'
  | 'done'
  | 'partial'
  | 'failed';

export interface SubtaskView {
  index: number;
  role: string;
  artifact: string;
  instruction?: string;
  readFiles?: string[];
  /** The plan's `token_cap` for it, when it set one. */
  tokenCap?: number;
  /** Every token its run used (cache reads and writes too), from its end event (older events have none). */
  tokens?: number;
  state: SubtaskState;
  attempt?: number;
  /** Its current attempt was delivered again after its run was lost. */
  restarted?: boolean;
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
  /** The stall detector acted at this cycle instead of the reflector's model. */
  stalled?: { cycles: number; action: string; reason: string; title: string };
  /** The latest pause in this cycle; `title` says what for (which budget, for a budget pause). */
  paused?: { pausedFor: string; budget?: string; reason: string; title: string };
  /** The resume of that pause; `raised` lists the budgets it raised. */
  /** `files`: the names of the files given with it, joined. */
  resumed?: { action: string; note?: string; raised?: string; files?: string };
  evicted: string[];
}

const BUDGET_WORD: Record<string, string> = { tokens: 'token', steps: 'cycle', seconds: 'time' };

function pausedTitle(e: EventOf<'paused'>): string {
  if (e.pausedFor === 'budget') return `Paused at its ${BUDGET_WORD[e.budget ?? 'tokens']} budget`;
  return `Paused for ${e.pausedFor}`;
}

function stalledTitle(e: EventOf<'stalled'>): string {
  const then = e.action === 'fail' ? 'the goal failed' : 'escalated to a human';
  return `Stalled: ${e.cycles} cycles without progress; ${then} without asking the model`;
}

function raisedText(b: NonNullable<EventOf<'resumed'>['budgets']>): string | undefined {
  const parts = [
    b.maxTokens !== undefined ? `max tokens ${count(b.maxTokens)}` : '',
    b.maxSteps !== undefined ? `max cycles ${count(b.maxSteps)}` : '',
    b.maxSeconds !== undefined ? `${b.maxSeconds} more seconds` : '',
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : undefined;
}

type EventOf<T extends TimelineEvent['type']> = Extract<TimelineEvent, { type: T }>;

export class GoalTimeline {
  private readonly cycles = new Map<number, CycleView>();
  /** The cycle of the pause not yet resumed: a resume belongs with it. */
  private openPause?: number;
  /** What each parked subtask was before: a raise puts it back. */
  private readonly parkedFrom = new Map<SubtaskView, SubtaskState>();

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
        this.applyReflected(e);
        return e.step;
      case 'stalled':
        this.cycle(e.step).stalled = { cycles: e.cycles, action: e.action, reason: e.reason, title: stalledTitle(e) };
        return e.step;
      case 'paused':
        return this.applyPaused(e);
      case 'resumed':
        return this.applyResumed(e);
      case 'finished':
        return this.stopOpen();
      default:
        return undefined;
    }
  }

  private applyReflected(e: EventOf<'reflected'>): void {
    const c = this.cycle(e.step);
    c.reflection = { decision: e.decision, reason: e.reason, threadId: e.threadId };
    // The reflector's view of each subtask: a partial one stays partial even if its finish was trimmed.
    for (const o of e.outcomes ?? []) {
      const s = c.subtasks.find((x) => x.index === o.index);
      if (s && o.status === 'partial') s.state = 'partial';
    }
  }

  private applyPaused(e: EventOf<'paused'>): number {
    const c = this.cycle(e.step);
    c.paused = { pausedFor: e.pausedFor, reason: e.reason, title: pausedTitle(e) };
    if (e.budget) c.paused.budget = e.budget;
    if (e.pausedFor === 'budget') for (const s of c.subtasks) this.park(s);
    // A new pause: any earlier resume of this cycle is history.
    delete c.resumed;
    this.openPause = e.step;
    return e.step;
  }

  /**
   * A resume goes with the pause it ends: a budget pause while planning is written at the next
   * cycle, its resume at the goal's current one.
   */
  private applyResumed(e: EventOf<'resumed'>): number {
    const step = this.openPause ?? e.step;
    this.openPause = undefined;
    const raised = e.budgets ? raisedText(e.budgets) : undefined;
    for (const s of this.cycle(step).subtasks) if (s.state === 'parked') s.state = this.parkedFrom.get(s) ?? 'running';
    const files = e.inputs?.length ? e.inputs.map((f) => f.name).join(', ') : undefined;
    this.cycle(step).resumed = {
      action: e.action,
      ...(e.note ? { note: e.note } : {}),
      ...(raised ? { raised } : {}),
      ...(files ? { files } : {}),
    };
    return step;
  }

  /** Adds the plan's own words (instruction, read_files) to a cycle's subtasks. */
  attachPlan(step: number, subtasks: Subtask[], source: string): void {
    const c = this.cycle(step);
    c.planSource = source;
    subtasks.forEach((t, index) => {
      const s = this.subtask(c, index, t.role, t.expected_artifact);
      s.instruction = t.instruction;
      s.readFiles = t.read_files;
      if (t.token_cap !== undefined) s.tokenCap = t.token_cap;
    });
  }

  /**
   * The goal ended with these subtasks open: their jobs stop without an event of their own, so
   * they would show running for ever. Returns the last cycle it changed.
   */
  private stopOpen(): number | undefined {
    let changed: number | undefined;
    for (const c of this.cycles.values()) {
      for (const s of c.subtasks) {
        if (s.state === 'done' || s.state === 'partial' || s.state === 'failed') continue;
        s.state = 'stopped';
        s.awaiting = [];
        changed = Math.max(changed ?? 0, c.step);
      }
    }
    return changed;
  }

  /** A job of a goal paused at a budget parks itself (at start, or at its next model call). */
  private park(s: SubtaskView): void {
    if (s.state !== 'queued' && s.state !== 'running') return;
    this.parkedFrom.set(s, s.state);
    s.state = 'parked';
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
      s.restarted = e.restarted === true;
      // A new attempt runs a new agent: its tool calls are its own.
      s.toolCalls = 0;
      s.toolErrors = 0;
      delete s.tokens;
      // Started as the goal paused: it parks at its first model call.
      if (this.openPause === e.step && this.cycle(e.step).paused?.pausedFor === 'budget') this.park(s);
      return;
    }
    s.state = e.type === 'subtask_failed' ? 'failed' : e.partial ? 'partial' : 'done';
    if (e.ms !== undefined) s.ms = e.ms;
    if (e.bytes !== undefined) s.bytes = e.bytes;
    if (e.tokens !== undefined) s.tokens = e.tokens;
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
    // Decided while its goal waits at a budget: the job parks at its next model call.
    if (this.openPause === e.step && this.cycle(e.step).paused?.pausedFor === 'budget') this.park(s);
  }

  private applyToolCall(e: EventOf<'tool_called'>): void {
    if (e.index === undefined) return;
    const s = this.cycle(e.step).subtasks.find((x) => x.index === e.index);
    if (!s) return;
    s.toolCalls++;
    if (!e.ok) s.toolErrors++;
  }
}
