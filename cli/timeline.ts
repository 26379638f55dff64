// Turns a goal's event stream into the `watch` view: a tree of cycles, then subtasks with
// role, state, duration, bytes and tokens; or one plain line per event when not on a TTY. Goal text,
// reasons and names come from users and models: every line's control characters are escaped.

import { cutChars } from '../shared/agent/tools/paging.ts';
import type { SubtaskRef, TimelineEvent } from '../shared/goal/events.ts';
import { showHiddenCharacters } from '../shared/runtime/bidi.ts';
import { clip, safeLine } from './terminal.ts';

interface SubtaskView extends SubtaskRef {
  state: string;
  ms?: number;
  bytes?: number;
  /** Every token of its model calls (cache reads and writes too), as its end event reports them. */
  tokens?: number;
  reason?: string;
  attempt?: number;
  /** Tool calls of the current attempt. */
  toolCalls?: number;
  /** Calls waiting for a human: call id → tool and input preview. */
  awaiting?: Map<string, string>;
}
interface CycleView {
  step: number;
  subtasks: Map<number, SubtaskView>;
  decision?: string;
  reason?: string;
  evicted: number;
  /** The stall detector stopped the goal at this cycle. */
  stalled?: boolean;
}
type EventOf<T extends TimelineEvent['type']> = Extract<TimelineEvent, { type: T }>;

/** States a subtask ends in; any other is still open when its goal ends. */
const ENDED = new Set(['done', 'partial', 'failed']);

export class TimelineView {
  readonly cycles = new Map<number, CycleView>();
  status = 'queued';
  goal = '';
  /** The files the goal started with (`enqueue --file`). */
  inputs: string[] = [];
  startedAt = 0;
  finishedReason?: string;
  /** Subtasks parked at a budget pause, with the state each had. */
  private readonly parkedFrom = new Map<SubtaskView, string>();
  /** The cycle whose budget pause is open (park), until a resume (unpark). */
  private budgetPausedAt: number | undefined;

  /** `goalId` goes into the hints that name a command to run (`deepq resume <goalId> …`). */
  constructor(private readonly goalId = '<goalId>') {}

  private cycle(step: number): CycleView {
    let c = this.cycles.get(step);
    if (!c) {
      c = { step, subtasks: new Map(), evicted: 0 };
      this.cycles.set(step, c);
    }
    return c;
  }

  apply(e: TimelineEvent): void {
    switch (e.type) {
      case 'created':
        this.goal = e.goal;
        this.inputs = e.inputs?.map((f) => f.name) ?? [];
        this.startedAt = e.at;
        break;
      case 'planned':
      case 'dispatched':
        this.applyPlan(e);
        break;
      case 'subtask_started':
      case 'subtask_finished':
      case 'subtask_failed':
        this.applySubtask(e);
        break;
      case 'tool_called':
        this.applyToolCall(e);
        break;
      case 'approval_requested':
      case 'approval_decided':
        this.applyApproval(e);
        break;
      case 'evicted':
        this.cycle(e.step).evicted++;
        break;
      case 'reflected':
        Object.assign(this.cycle(e.step), { decision: e.decision, reason: e.reason });
        break;
      case 'stalled':
        this.cycle(e.step).stalled = true;
        break;
      case 'paused':
        this.status = 'awaiting_human';
        this.finishedReason = pauseReason(e, this.goalId);
        if (e.pausedFor === 'budget') this.park(e.step);
        break;
      // A pause's reason is over once a human resumes; an end says its own (or none).
      case 'resumed':
        this.status = 'running';
        this.finishedReason = undefined;
        this.unpark();
        // Files given with a resume join the goal's inputs (one given again is listed once).
        if (e.inputs) this.inputs = [...new Set([...this.inputs, ...e.inputs.map((f) => f.name)])];
        break;
      case 'finished':
        this.status = e.status;
        this.finishedReason = e.reason;
        this.stopOpen(e.status);
        break;
    }
  }

  /** A goal paused at a budget: its queued and running jobs park until a resume raises it. */
  private park(step: number): void {
    this.budgetPausedAt = step;
    for (const t of this.cycle(step).subtasks.values()) {
      if (t.state !== 'queued' && t.state !== 'running') continue;
      this.parkedFrom.set(t, t.state);
      t.state = 'parked';
    }
  }

  private unpark(): void {
    this.budgetPausedAt = undefined;
    for (const [t, state] of this.parkedFrom) if (t.state === 'parked') t.state = state;
    this.parkedFrom.clear();
  }

  /**
   * The goal ended (a cancel, a budget end) with these subtasks unfinished: their jobs stop
   * without an event of their own, so they would show running for ever.
   */
  private stopOpen(status: string): void {
    for (const c of this.cycles.values()) {
      for (const t of c.subtasks.values()) {
        if (ENDED.has(t.state)) continue;
        t.state = `stopped (${status})`;
        t.awaiting = undefined;
      }
    }
  }

  private applyPlan(e: EventOf<'planned' | 'dispatched'>): void {
    const c = this.cycle(e.step);
    e.subtasks.forEach((t, i) => {
      const index = (t as Partial<SubtaskRef>).index ?? i;
      const seen = c.subtasks.get(index);
      if (!seen) {
        const state = e.type === 'dispatched' ? 'queued' : 'planned';
        c.subtasks.set(index, { index, role: t.role, artifact: t.artifact, state });
      } else if (e.type === 'dispatched' && seen.state === 'planned') {
        seen.state = 'queued';
      }
    });
    this.status = 'running';
  }

  private applySubtask(e: EventOf<'subtask_started' | 'subtask_finished' | 'subtask_failed'>): void {
    const c = this.cycle(e.step);
    const t = c.subtasks.get(e.index) ?? { index: e.index, role: e.role, artifact: e.artifact, state: 'queued' };
    t.state = e.type === 'subtask_started' ? 'running' : e.type === 'subtask_finished' ? 'done' : 'failed';
    if (e.type === 'subtask_finished' && e.partial) t.state = 'partial';
    if (e.type === 'subtask_started') {
      t.attempt = e.attempt;
      t.toolCalls = 0;
    } else {
      if (e.ms !== undefined) t.ms = e.ms;
      if (e.bytes !== undefined) t.bytes = e.bytes;
      if (e.tokens !== undefined) t.tokens = e.tokens;
      if (e.reason) t.reason = e.reason;
    }
    c.subtasks.set(e.index, t);
  }

  private applyToolCall(e: EventOf<'tool_called'>): void {
    if (e.index === undefined) return;
    const t = this.cycle(e.step).subtasks.get(e.index);
    if (t) t.toolCalls = (t.toolCalls ?? 0) + 1;
  }

  /** A subtask waits while any of its calls does; the tree names each call to decide on. */
  private applyApproval(e: EventOf<'approval_requested' | 'approval_decided'>): void {
    const t = this.cycle(e.step).subtasks.get(e.index);
    if (!t) return;
    t.awaiting ??= new Map();
    if (e.type === 'approval_requested')
      t.awaiting.set(e.callId, `${showHiddenCharacters(e.tool)} ${clip(showHiddenCharacters(e.input), 60)}`);
    else t.awaiting.delete(e.callId);
    if (t.state === 'running' || t.state === 'awaiting approval')
      t.state = t.awaiting.size ? 'awaiting approval' : 'running';
    // Decided while its goal waits at a budget: the job parks at its next model call.
    if (t.state === 'running' && this.budgetPausedAt === e.step) {
      this.parkedFrom.set(t, 'running');
      t.state = 'parked';
    }
  }

  render(): string {
    const lines = [`goal: ${clip(this.goal, 100)}  [${this.status}]`];
    if (this.inputs.length) lines.push(`files: ${inputList(this.inputs)}`);
    for (const c of [...this.cycles.values()].sort((a, b) => a.step - b.step)) {
      const decision = c.decision ? `  → ${c.decision}${c.reason ? ` (${clip(c.reason, 80)})` : ''}` : '';
      const marks = `${c.stalled ? '  [stalled]' : ''}${c.evicted ? `  [${c.evicted} evicted]` : ''}`;
      lines.push(`└─ cycle ${c.step}${decision}${marks}`);
      const subs = [...c.subtasks.values()].sort((a, b) => a.index - b.index);
      for (const [i, t] of subs.entries()) {
        const last = i === subs.length - 1;
        lines.push(subtaskLine(t, last));
        for (const [callId, what] of t.awaiting ?? []) lines.push(`   ${last ? ' ' : '│'}    ⏸ ${callId} ${what}`);
      }
    }
    if (this.finishedReason && this.status !== 'running') lines.push(`reason: ${this.finishedReason}`);
    // Line by line: a newline inside a reason must not add a line the redraw does not count.
    return lines.map(safeLine).join('\n');
  }
}

function subtaskLine(t: SubtaskView, last: boolean): string {
  const branch = last ? '└─' : '├─';
  const extra = [
    t.toolCalls ? `${t.toolCalls} tool call${t.toolCalls === 1 ? '' : 's'}` : '',
    t.ms !== undefined ? `${(t.ms / 1000).toFixed(2)}s` : '',
    t.bytes !== undefined ? `${t.bytes} B` : '',
    t.tokens !== undefined ? `${t.tokens} tok` : '',
    t.reason ? clip(t.reason, 80) : '',
  ]
    .filter(Boolean)
    .join(', ');
  // Escaped before padding, so the columns stay aligned.
  const what = `[${t.index}] ${safeLine(t.role).padEnd(20)} ${safeLine(t.artifact).padEnd(18)} ${t.state}`;
  return `   ${branch} ${what}${extra ? `  (${extra})` : ''}`;
}

/** Why a goal waits: a budget pause says which budget and how to raise it. */
function pauseReason(e: EventOf<'paused'>, goalId: string): string {
  const why = e.reason || e.decision || `paused for ${e.pausedFor}`;
  if (e.pausedFor !== 'budget') return why;
  const flag = { tokens: '--max-tokens', steps: '--max-steps', seconds: '--max-seconds' }[e.budget ?? 'tokens'];
  return `${why} (raise it: deepq resume ${goalId} ${flag} N)`;
}

/** A resume's note for the planner, quoted on one line (the line is escaped as a whole). */
function noteText(note: string | undefined): string {
  if (!note) return '';
  const oneLine = note.replace(/\s+/g, ' ').trim();
  return `: "${oneLine.length > 120 ? `${cutChars(oneLine, 119)}…` : oneLine}"`;
}

function raisedText(b: NonNullable<EventOf<'resumed'>['budgets']>): string {
  const parts = [
    b.maxTokens !== undefined ? `max tokens ${b.maxTokens}` : '',
    b.maxSteps !== undefined ? `max steps ${b.maxSteps}` : '',
    b.maxSeconds !== undefined ? `${b.maxSeconds} more seconds` : '',
  ];
  return parts.filter(Boolean).join(', ');
}

/** One line per event, for logs and non-TTY output; control characters escaped. */
export function formatEventLine(e: TimelineEvent, t0: number, goalId = '<goalId>'): string {
  const at = `+${((e.at - t0) / 1000).toFixed(2)}s`.padStart(8);
  const step = e.type !== 'finished' && 'step' in e ? `cycle ${e.step} ` : '';
  return safeLine(`${at} ${step}${describe(e, goalId)}`);
}

/** A later attempt, or the same one delivered again after its run was lost. */
function startNote(e: EventOf<'subtask_started'>): string {
  const notes = [
    e.attempt > 1 ? `attempt ${e.attempt}` : '',
    e.restarted ? 'restarted: its earlier run did not finish' : '',
  ];
  const said = notes.filter(Boolean).join(', ');
  return said ? ` (${said})` : '';
}

/** A goal's input files by name, the first few only when they are many. */
function inputList(names: string[]): string {
  const shown = names.slice(0, 5).join(', ');
  return names.length > 5 ? `${shown} and ${names.length - 5} more` : shown;
}

function describe(e: TimelineEvent, goalId: string): string {
  switch (e.type) {
    case 'created': {
      const inputs = e.inputs?.length ? ` (with ${inputList(e.inputs.map((f) => f.name))})` : '';
      return `created: ${clip(e.goal, 100)}${inputs}`;
    }
    case 'planned':
      return `planned ${e.subtasks.length} subtask(s): ${e.subtasks.map((s) => `${s.role}→${s.artifact}`).join(', ')}`;
    case 'dispatched':
      return 'dispatched';
    case 'subtask_started':
      return `[${e.index}] ${e.role} started ${e.artifact}${startNote(e)}`;
    case 'subtask_finished': {
      const how = e.partial ? `PARTIAL ${e.artifact}: ${e.reason ?? 'stopped at its token cap'}` : e.artifact;
      const tok = e.tokens !== undefined ? `, ${e.tokens} tok` : '';
      return `[${e.index}] ${e.role} finished ${how} (${e.bytes} B, ${((e.ms ?? 0) / 1000).toFixed(2)}s${tok})`;
    }
    case 'subtask_failed':
      return `[${e.index}] ${e.role} FAILED ${e.artifact}: ${e.reason ?? ''}${e.tokens ? ` (${e.tokens} tok)` : ''}`;
    case 'tool_called': {
      const who = `${e.index === undefined ? '' : `[${e.index}] `}${e.role}`;
      if (e.unknown) return `${who} called ${e.tool} (OUTCOME UNKNOWN: its run died mid-call; not made again)`;
      return `${who} called ${e.tool} (${e.ok ? 'ok' : 'FAILED'}, ${e.ms} ms)`;
    }
    case 'approval_requested': {
      const until = new Date(e.expiresAt).toISOString();
      const [tool, input] = [showHiddenCharacters(e.tool), showHiddenCharacters(e.input)];
      return `[${e.index}] ${e.role} approval requested ${e.callId}: ${tool} ${input} (until ${until})`;
    }
    case 'approval_decided': {
      const reason = e.reason ? `: ${e.reason}` : '';
      return `[${e.index}] ${e.role} ${e.callId} (${showHiddenCharacters(e.tool)}) ${e.decision}${reason}`;
    }
    case 'evicted':
      return `evicted ${e.name} (${e.reason})`;
    case 'reflected':
      return `reflected: ${e.decision} (${clip(e.reason, 120)})`;
    case 'stalled':
      return `STALLED, ${e.action === 'fail' ? 'failing' : 'escalating'} without asking the model: ${e.reason}`;
    case 'paused':
      return `paused for a human (${e.pausedFor}): ${pauseReason(e, goalId)}`;
    case 'resumed': {
      const files = e.inputs?.length ? ` (files: ${inputList(e.inputs.map((f) => f.name))})` : '';
      return `resumed: ${e.action}${files}${e.budgets ? ` (${raisedText(e.budgets)})` : ''}${noteText(e.note)}`;
    }
    case 'finished':
      return `finished: ${e.status}${e.reason ? ` (${e.reason})` : ''}`;
  }
}
