// The goal state machine: every status change is one named transition here, and nothing
// else moves a goal. Each transition owns its allowed from-states, the fields it writes, the
// timeline events it appends (atomically with the move, lua/goalTransition.lua) and its metric.
//
//   transition        from                       to               events
//   beginPlanning     queued, planning           planning         -
//     planJobStart    the same, for a plan job: the goal read with the move, a stale cycle refused
//   dispatch          planning                   running          (planned,) dispatched
//   beginReflecting   running, reflecting        reflecting       -
//     reflectJobStart the same, for a reflect job: the goal read with the move, only at its cycle
//   requeue           reflecting                 queued           reflected
//   awaitHuman        reflecting                 awaiting_human   reflected, (stalled,) paused
//   complete          reflecting                 done             reflected, finished
//   failStalled       reflecting                 failed           reflected, stalled, finished
//   pauseForBudget    queued, planning, running, awaiting_human   paused (pausedFor budget)
//                     reflecting
//   resume            awaiting_human             queued           resumed
//   resumeFromBudget  awaiting_human (budget)    the paused one   resumed
//   approveEnd        awaiting_human             done             resumed, finished
//   fail              any non-terminal (or set)  failed           finished
//   exceedBudget      any non-terminal           budget_exceeded  finished
//   cancel            any non-terminal           cancelled        finished
//   abandon           awaiting_human             cancelled        finished
//
// Terminal statuses (done, failed, cancelled, budget_exceeded) are final: the script refuses
// to leave them. A refused transition returns false and changes nothing. Every call carries a
// fresh operation id: when its reply is lost and ioredis sends it again, the replay returns
// true instead of "refused". A goal awaiting a human keeps its keys; other moves renew the TTL
// once less than half of it is left (the goal's `ttlAt` says when the keys expire), and at the
// end. A move a
// model run decided (a plan dispatched, a reflection applied) stores that run's transcript in
// the same script; a refused move stores it on its own.
import type { Redis } from 'ioredis';
import { type TranscriptWrite, withTranscript } from '../agent/transcripts.ts';
import type { BudgetKind } from '../errors.ts';
import { runScript } from '../runtime/scripts.ts';
import type { BudgetHit, Budgets } from './budgets.ts';
import {
  type PausedFor,
  type StallAction,
  type SubtaskOutcomeRef,
  storedEvent,
  subtaskRefs,
  type TimelineEventBody,
} from './events.ts';
import { newOperationId } from './ids.ts';
import type { Keys } from './keys.ts';
import type { Plan, Reflection } from './plan.ts';
import type { CycleOutcome, ProgressEntry } from './progress.ts';
import { type GoalStatus, isTerminal, type TerminalStatus } from './status.ts';
import { type GoalRecord, parseGoal } from './store.ts';

/** The goal hash fields a transition may write, typed; encoded to strings for the script. */
export interface GoalFields {
  plan?: Plan;
  planStep?: number;
  step?: number;
  depth?: number;
  reflection?: Reflection & { step: number };
  note?: string;
  reason?: string;
  pausedFor?: PausedFor | '';
  pausedFrom?: GoalStatus | '';
  pausedBudget?: BudgetKind | '';
  /** At a token budget pause: what the refused call needed ('' when not known or not paused). */
  pausedNeed?: number | '';
  /** How many times a human resumed the goal (the next plan job's id suffix). */
  resumes?: number;
  budgets?: Budgets;
  outcomes?: CycleOutcome[];
  progress?: ProgressEntry[];
  subtasksByRole?: Record<string, number>;
}

interface Move {
  from?: readonly GoalStatus[];
  to?: GoalStatus;
  fields?: GoalFields;
  events?: TimelineEventBody[];
  /** A field that records the status the move left. */
  recordFrom?: 'pausedFrom';
  /** The run that decided the move: its transcript lands with it (on its own if the move is refused). */
  transcript?: TranscriptWrite;
  /** Return the goal's files index (flat name, entry JSON pairs) with the move. */
  withFiles?: boolean;
  /** Refuse the move unless the goal is at these cycles (a stale delivery's late move). */
  guard?: CycleGuard;
  /** Refuse the move unless the goal is in this pause (GoalRecord.pauses): a human's answer to it. */
  pause?: number;
}

/** A move that was made; `files` when it was asked for (not on a replay of a lost reply). */
export interface Moved {
  files?: string[];
}

/**
 * A job's start (planJobStart, reflectJobStart): the goal as it was before the move, read in
 * the same script, and whether the move was made (refused: the goal is elsewhere, or the job is
 * for a cycle outside the guard). One round trip where a read and a move were two.
 */
export interface JobStart extends Moved {
  goal: GoalRecord;
  moved: boolean;
}

export interface LifecycleOptions {
  keyTtlSeconds: number;
  eventsMaxLen: number;
  /** How long a finished goal's keys must last; the end renews the TTL only when less is left,
   *  to this if it is the longer (absent: the end always sets the whole TTL). */
  keptAfterEndSeconds?: number;
  /** Counts goals reaching a status (deepq_goals_total); absent in the CLI. */
  onStatus?: (status: GoalStatus) => void;
  /** A goal ended, after this many cycles (deepq_goal_cycles); absent in the CLI. */
  onTerminal?: (status: TerminalStatus, cycles: number) => void;
  /** A budget ran out and the goal paused or ended (deepq_budget_events_total). */
  onBudget?: (kind: BudgetKind, action: 'pause' | 'end') => void;
}

/** What a human's resume changes besides the status. */
export interface ResumeOptions {
  note?: string;
  /** Clear the progress record: the stall count starts again. */
  restart?: boolean;
  budgets?: Budgets;
  raised?: Budgets;
  /** Files given with the resume, already stored: named in its event. */
  inputs?: { name: string; bytes: number }[];
  /** The pause the human answered (GoalRecord.pauses): refused if the goal has paused again since. */
  pause?: number;
}

/** A goal paused at a budget carries on: back to `to`, at cycle `step`, with `budgets` (`raised`: the new ones). */
export interface BudgetResume {
  step: number;
  to: GoalStatus;
  budgets: Budgets;
  raised: Budgets;
  /** The pause the human answered (GoalRecord.pauses). */
  pause?: number;
}

/** What a reflection decided, with what the reflected event reports. */
export interface Decided {
  step: number;
  reflection: Reflection;
  threadId?: string;
  outcomes: SubtaskOutcomeRef[];
  /** The cycle's subtasks with roles, artifacts and reasons: kept for the next planner. */
  details?: CycleOutcome[];
  /** The progress record with this cycle in it. */
  progress?: ProgressEntry[];
  /** Cycles reflected since the goal began or a human last resumed it, this one included. */
  depth?: number;
  /** Set when the decision is the stall detector's, not the model's. */
  stalled?: { reason: string; cycles: number; action: StallAction };
  /** The reflector run's transcript, stored with the move. */
  transcript?: TranscriptWrite;
}

/** Statuses a goal is working in: a budget can run out in any of them. */
const WORKING: readonly GoalStatus[] = ['queued', 'planning', 'running', 'reflecting'];

/** The reason a goal a human ended as done (`deepq resume --end`) gives. */
export const HUMAN_END = 'ended as done by a human';

export class GoalLifecycle {
  /** goalTransition.lua's ARGV[7]: the backstop TTL, and how long a finished goal must last. */
  private readonly ttlArg: string;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly opts: LifecycleOptions,
  ) {
    const kept = opts.keptAfterEndSeconds;
    this.ttlArg = kept === undefined ? String(opts.keyTtlSeconds) : `${opts.keyTtlSeconds}:${kept}`;
  }

  /**
   * Into planning, whatever the goal's cycle (a plan job starts with planJobStart, which guards
   * it); null when refused, else the goal's files index, read with the move.
   */
  beginPlanning(goalId: string): Promise<Moved | null> {
    return this.moved(goalId, { from: ['queued', 'planning'], to: 'planning', withFiles: true });
  }

  /**
   * A plan job for cycle `step` starts: into planning unless the goal is past that cycle (its
   * step at `step` or more, or a plan stored for a later one). Null when the goal is gone.
   */
  planJobStart(goalId: string, step: number): Promise<JobStart | null> {
    const move: Move = { from: ['queued', 'planning'], to: 'planning', withFiles: true };
    return this.started(goalId, move, planCycle(step));
  }

  /** A reflect job for cycle `step` starts: into reflecting only while the goal is at that cycle. */
  reflectJobStart(goalId: string, step: number): Promise<JobStart | null> {
    const move: Move = { from: ['running', 'reflecting'], to: 'reflecting', withFiles: true };
    return this.started(goalId, move, { minStep: step, maxStep: step, maxPlanStep: step });
  }

  /**
   * Stores the chosen plan and moves the goal on to run it, in one move: the first delivery to
   * get here wins, and a concurrent one (refused) dispatches the plan stored. `threadId`: the
   * planner run that chose it (a `planned` event); `before`: subtasks dispatched per role until
   * now, to which this plan's are added.
   */
  dispatch(
    goalId: string,
    step: number,
    plan: Plan,
    opts: { threadId?: string; before?: Record<string, number>; transcript?: TranscriptWrite } = {},
  ): Promise<boolean> {
    const subtasksByRole = { ...opts.before };
    for (const t of plan.subtasks) subtasksByRole[t.role] = (subtasksByRole[t.role] ?? 0) + 1;
    const refs = subtaskRefs(plan);
    const planned: TimelineEventBody[] = opts.threadId
      ? [
          {
            type: 'planned',
            step,
            threadId: opts.threadId,
            subtasks: refs.map(({ role, artifact }) => ({ role, artifact })),
          },
        ]
      : [];
    return this.move(goalId, {
      from: ['planning'],
      to: 'running',
      // As planJobStart's: a plan job of an earlier cycle whose call came back late dispatches nothing.
      guard: planCycle(step),
      fields: { plan, planStep: step, step, note: '', subtasksByRole },
      events: [...planned, { type: 'dispatched', step, subtasks: refs }],
      transcript: opts.transcript,
    });
  }

  /**
   * Into reflecting, whatever the goal's cycle (a reflect job starts with reflectJobStart, which
   * guards it); null when refused, else the goal's files index, read with the move.
   */
  beginReflecting(goalId: string): Promise<Moved | null> {
    return this.moved(goalId, { from: ['running', 'reflecting'], to: 'reflecting', withFiles: true });
  }

  /** The reflection chose another cycle: the goal waits for its next plan job. */
  requeue(goalId: string, d: Decided): Promise<boolean> {
    const fields = decisionFields(d);
    return this.move(goalId, {
      from: ['reflecting'],
      guard: atCycle(d.step),
      to: 'queued',
      fields,
      events: [reflected(d)],
      transcript: d.transcript,
    });
  }

  /** A human must decide: after an escalation, or to confirm the decision under review. */
  async awaitHuman(goalId: string, d: Decided, pausedFor: PausedFor): Promise<boolean> {
    const reason =
      pausedFor === 'review' ? `review: the reflector chose ${d.reflection.decision}` : d.reflection.reason;
    const paused: TimelineEventBody = {
      type: 'paused',
      step: d.step,
      pausedFor,
      reason: d.reflection.reason,
      ...(pausedFor === 'review' ? { decision: d.reflection.decision } : {}),
    };
    return this.move(goalId, {
      from: ['reflecting'],
      guard: atCycle(d.step),
      to: 'awaiting_human',
      fields: { ...decisionFields(d), pausedFor, reason },
      events: [reflected(d), ...stalledEvents(d), paused],
      transcript: d.transcript,
    });
  }

  /** The stall detector ends the goal (`stall.action: fail`) with the reason naming what repeated. */
  failStalled(goalId: string, d: Decided): Promise<boolean> {
    const reason = d.stalled?.reason ?? d.reflection.reason;
    const finished: TimelineEventBody = { type: 'finished', status: 'failed', reason, step: d.step };
    return this.move(goalId, {
      from: ['reflecting'],
      guard: atCycle(d.step),
      to: 'failed',
      fields: { ...decisionFields(d), reason },
      events: [reflected(d), ...stalledEvents(d), finished],
      transcript: d.transcript,
    });
  }

  /**
   * A budget ran out in `pause` mode: the goal waits for a human with its work kept, and
   * remembers the status it left; its jobs park themselves (shared/goal/parking.ts).
   */
  async pauseForBudget(goalId: string, hit: BudgetHit, step: number): Promise<boolean> {
    const paused: TimelineEventBody = {
      type: 'paused',
      step,
      pausedFor: 'budget',
      reason: hit.reason,
      budget: hit.kind,
    };
    const moved = await this.move(goalId, {
      from: WORKING,
      to: 'awaiting_human',
      fields: { pausedFor: 'budget', pausedBudget: hit.kind, pausedNeed: hit.need ?? '', reason: hit.reason },
      events: [paused],
      recordFrom: 'pausedFrom',
    });
    if (moved) this.opts.onBudget?.(hit.kind, 'pause');
    return moved;
  }

  /** Carries on a goal paused at a budget, with its budgets raised: back to the status it left. */
  resumeFromBudget(goalId: string, r: BudgetResume) {
    const raised = { maxTokens: r.raised.maxTokens, maxSteps: r.raised.maxSteps, maxSeconds: r.raised.maxSeconds };
    return this.move(goalId, {
      from: ['awaiting_human'],
      pause: r.pause,
      to: r.to,
      fields: { pausedFor: '', pausedFrom: '', pausedBudget: '', pausedNeed: '', reason: '', budgets: r.budgets },
      events: [{ type: 'resumed', step: r.step, action: 'raise budget', budgets: stripUndefined(raised) }],
    });
  }

  complete(goalId: string, d: Decided): Promise<boolean> {
    return this.move(goalId, {
      from: ['reflecting'],
      guard: atCycle(d.step),
      to: 'done',
      fields: { ...decisionFields(d), reason: d.reflection.reason },
      events: [reflected(d), { type: 'finished', status: 'done', step: d.step }],
      transcript: d.transcript,
    });
  }

  /**
   * A human carries on a goal: it re-plans (or applies a reviewed decision). `restart` clears
   * the progress record (after an escalation: the stall count starts again); the depth starts
   * again in any case; `budgets` are the goal's budgets with any the human raised.
   */
  resume(goalId: string, step: number, action: string, resumes: number, opts: ResumeOptions = {}): Promise<boolean> {
    const { note, budgets, raised, inputs } = opts;
    const fields: GoalFields = {
      pausedFor: '',
      note: note ?? '',
      reason: '',
      resumes,
      ...(budgets ? { budgets } : {}),
    };
    if (opts.restart) fields.progress = [];
    // A human looked at it: the max depth counts the cycles from here.
    fields.depth = 0;
    const resumed: TimelineEventBody = { type: 'resumed', step, action };
    if (note) resumed.note = note.slice(0, 500);
    if (raised && Object.keys(stripUndefined(raised)).length) resumed.budgets = stripUndefined(raised);
    if (inputs?.length) resumed.inputs = inputs;
    return this.move(goalId, { from: ['awaiting_human'], pause: opts.pause, to: 'queued', fields, events: [resumed] });
  }

  /**
   * A reviewed `end` confirmed by a human. The goal's end message tells the reflector, which
   * counts it (the CLI and the inspector keep no goal metrics), as it counts a cancel.
   */
  async approveEnd(goalId: string, step: number, pause?: number): Promise<boolean> {
    const moved = await this.move(goalId, {
      from: ['awaiting_human'],
      pause,
      to: 'done',
      // The pause's reason (an escalation, a review) is over: the goal reads as a human ended it.
      fields: { pausedFor: '', reason: HUMAN_END },
      events: [
        { type: 'resumed', step, action: 'end' },
        { type: 'finished', status: 'done', step, reason: HUMAN_END },
      ],
    });
    if (moved) await this.announceHumanEnd(goalId, true);
    return moved;
  }

  /**
   * Tells every process a goal a human ended (its running calls abort), and leaves one this call
   * moved for a reflector to count (services/reflector/cancel-counts.ts): the CLI and the
   * inspector keep no goal metrics, and a reflector that was not listening counts it at its sweep.
   */
  async announceHumanEnd(goalId: string, moved: boolean): Promise<void> {
    const p = this.redis.pipeline();
    if (moved) p.zadd(this.keys.uncountedEnds(), Date.now(), goalId);
    p.publish(this.keys.cancelChannel(), goalId);
    await p.exec();
  }

  /**
   * Fails the goal (from one of `from`, at the cycles `guard` allows: a job's failure fails only a
   * goal still at that job's cycle, never one a later delivery or a human moved on).
   */
  fail(
    goalId: string,
    reason: string,
    step?: number,
    from?: readonly GoalStatus[],
    guard?: CycleGuard,
  ): Promise<boolean> {
    return this.finish(goalId, 'failed', reason, step, from, guard);
  }

  async exceedBudget(goalId: string, reason: string, step?: number, kind: BudgetKind = 'tokens'): Promise<boolean> {
    const moved = await this.finish(goalId, 'budget_exceeded', reason, step);
    if (moved) this.opts.onBudget?.(kind, 'end');
    return moved;
  }

  cancel(goalId: string, step: number): Promise<boolean> {
    return this.finish(goalId, 'cancelled', 'cancelled by user', step);
  }

  /** Nobody decided within the awaiting retention: the goal ends instead of expiring. */
  abandon(goalId: string, reason: string, step: number): Promise<boolean> {
    return this.finish(goalId, 'cancelled', reason, step, ['awaiting_human']);
  }

  private finish(
    goalId: string,
    status: Exclude<TerminalStatus, 'done'>,
    reason: string,
    step?: number,
    from?: readonly GoalStatus[],
    guard?: CycleGuard,
  ): Promise<boolean> {
    const finished: TimelineEventBody = { type: 'finished', status, reason, ...(step !== undefined ? { step } : {}) };
    return this.move(goalId, { from, to: status, fields: { reason }, events: [finished], guard });
  }

  private async move(goalId: string, m: Move): Promise<boolean> {
    return (await this.moved(goalId, m)) !== null;
  }

  private async started(goalId: string, m: Move, guard: CycleGuard): Promise<JobStart | null> {
    const reads = `g${m.withFiles ? 'f' : ''}${guarded(guard)}`;
    const res = await this.transition(goalId, m, reads);
    if (!Array.isArray(res)) return null;
    const [prev, , files, flat] = res as [string, string, string[], string[]];
    const goal = parseGoal(goalId, pairsOf(flat));
    if (prev === '') return { goal, moved: false };
    return { goal, moved: true, ...(m.withFiles ? { files } : {}) };
  }

  private async moved(goalId: string, m: Move): Promise<Moved | null> {
    const pause = m.pause === undefined ? '' : `#${m.pause}`;
    const res = await this.transition(goalId, m, `${m.withFiles ? 'f' : ''}${m.guard ? guarded(m.guard) : ''}${pause}`);
    if (!Array.isArray(res)) return null;
    const files = res[2] as string[] | undefined;
    return files ? { files } : {};
  }

  /** Runs the move (lua/goalTransition.lua); `reads` is its ARGV[10]. Counts a status reached. */
  private async transition(goalId: string, m: Move, reads: string, now = Date.now()): Promise<unknown> {
    const events = (m.events ?? []).map((e) => storedEvent(e, now)).join('\n');
    const k = this.keys;
    const t = m.transcript;
    const keys = [k.goal(goalId), k.events(goalId), k.files(goalId), k.content(goalId), k.liveGoals()];
    // Untouched without a transcript: a script's key count is fixed.
    keys.push(t?.keys[0] ?? k.transcript(goalId, ''), k.threads(goalId), k.reservations(goalId), k.history(goalId));
    keys.push(k.endedGoals());
    const res = await withTranscript(
      { redis: this.redis },
      t,
      () =>
        runScript(this.redis, 'goalTransition', keys, [
          m.from?.join(',') || '*',
          m.to ?? '',
          now,
          goalId,
          events,
          this.opts.eventsMaxLen,
          this.ttlArg,
          // Unique per call: a re-send of this very call (lost reply) is recognised as a replay.
          newOperationId(),
          m.recordFrom ?? '',
          reads,
          t?.args.length ?? 0,
          ...(t?.args ?? []),
          ...Object.entries(encodeFields(m.fields ?? {})).flat(),
        ]),
      (r) => !Array.isArray(r),
    );
    if (!Array.isArray(res)) return res;
    const [prev, step] = res as [string, string];
    if (prev !== '' && m.to && m.to !== prev) this.counted(m.to, Number(step));
    return res;
  }

  private counted(status: GoalStatus, step: number): void {
    this.opts.onStatus?.(status);
    if (isTerminal(status)) this.opts.onTerminal?.(status, step);
  }
}

export interface CycleGuard {
  minStep: number;
  maxStep: number;
  maxPlanStep: number;
}

/** goalTransition.lua's cycle guard, after ARGV[10]'s letters. */
const guarded = (g: CycleGuard) => `:${g.minStep}:${Math.max(0, g.maxStep)}:${g.maxPlanStep}`;

/**
 * A reflection's decision moves the goal only while it reflects that cycle: a delivery whose
 * lock ran out during its model call (another replica reflected the cycle, and the goal went on)
 * comes back to a goal `reflecting` a later cycle, where its decision must not land.
 */
export const atCycle = (step: number): CycleGuard => ({ minStep: step, maxStep: step, maxPlanStep: step });

/** A plan job's cycle: the goal not past cycle `step` (no later step, no later plan stored), as planJobStart's. */
export const planCycle = (step: number): CycleGuard => ({ minStep: 0, maxStep: step - 1, maxPlanStep: step });

function pairsOf(flat: string[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
  return h;
}

function reflected(d: Decided): TimelineEventBody {
  const { decision, reason } = d.reflection;
  return {
    type: 'reflected',
    step: d.step,
    decision,
    reason,
    ...(d.threadId ? { threadId: d.threadId } : {}),
    outcomes: d.outcomes,
  };
}

function decisionFields(d: Decided): GoalFields {
  const fields: GoalFields = { reflection: { ...d.reflection, step: d.step }, depth: d.depth ?? d.step };
  if (d.details) fields.outcomes = d.details;
  if (d.progress) fields.progress = d.progress;
  return fields;
}

function stalledEvents(d: Decided): TimelineEventBody[] {
  return d.stalled ? [{ type: 'stalled', step: d.step, ...d.stalled }] : [];
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Objects as JSON, numbers as decimal strings (Lua would print big numbers as floats). */
function encodeFields(fields: GoalFields): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    out[k] = typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  return out;
}
