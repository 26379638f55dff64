// The goal state machine: every status change is one named transition here, and nothing
// else moves a goal. Each transition owns its allowed from-states, the fields it writes, the
// timeline events it appends (atomically with the move, lua/goalTransition.lua) and its metric.
//
//   transition        from                       to               events
//   beginPlanning     queued, planning           planning         -
//   recordPlan        planning                   (stays)          planned
//   dispatch          planning                   running          dispatched
//   beginReflecting   running, reflecting        reflecting       -
//   requeue           reflecting                 queued           reflected
//   awaitHuman        reflecting                 awaiting_human   reflected, paused
//   complete          reflecting                 done             reflected, finished
//   resume            awaiting_human             queued           resumed
//   approveEnd        awaiting_human             done             resumed, finished
//   fail              any non-terminal (or set)  failed           finished
//   exceedBudget      any non-terminal           budget_exceeded  finished
//   cancel            any non-terminal           cancelled        finished
//   abandon           awaiting_human             cancelled        finished
//
// Terminal statuses (done, failed, cancelled, budget_exceeded) are final: the script refuses
// to leave them. A refused transition returns false and changes nothing. Every call carries a
// fresh operation id: when its reply is lost and ioredis sends it again, the replay returns
// true instead of "refused". A goal awaiting a human keeps its keys; other moves refresh the TTL.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { runScript } from '../runtime/scripts.ts';
import { type PausedFor, type SubtaskOutcomeRef, subtaskRefs, type TimelineEventBody } from './events.ts';
import type { Keys } from './keys.ts';
import type { Plan, Reflection } from './plan.ts';
import type { GoalStatus, TerminalStatus } from './status.ts';

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
  /** How many times a human resumed the goal (the next plan job's id suffix). */
  resumes?: number;
}

interface Move {
  from?: readonly GoalStatus[];
  to?: GoalStatus;
  fields?: GoalFields;
  events?: TimelineEventBody[];
}

export interface LifecycleOptions {
  keyTtlSeconds: number;
  eventsMaxLen: number;
  /** Counts goals reaching a status (deepq_goals_total); absent in the CLI. */
  onStatus?: (status: GoalStatus) => void;
}

/** What a reflection decided, with what the reflected event reports. */
export interface Decided {
  step: number;
  reflection: Reflection;
  threadId?: string;
  outcomes: SubtaskOutcomeRef[];
}

export class GoalLifecycle {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly opts: LifecycleOptions,
  ) {}

  beginPlanning(goalId: string): Promise<boolean> {
    return this.move(goalId, { from: ['queued', 'planning'], to: 'planning' });
  }

  /** Stores the chosen plan while still planning: a concurrent delivery's plan never replaces it. */
  recordPlan(goalId: string, step: number, plan: Plan, threadId: string): Promise<boolean> {
    const subtasks = plan.subtasks.map((t) => ({ role: t.role, artifact: t.expected_artifact }));
    return this.move(goalId, {
      from: ['planning'],
      fields: { plan, planStep: step },
      events: [{ type: 'planned', step, threadId, subtasks }],
    });
  }

  dispatch(goalId: string, step: number, plan: Plan): Promise<boolean> {
    return this.move(goalId, {
      from: ['planning'],
      to: 'running',
      fields: { step, note: '' },
      events: [{ type: 'dispatched', step, subtasks: subtaskRefs(plan) }],
    });
  }

  beginReflecting(goalId: string): Promise<boolean> {
    return this.move(goalId, { from: ['running', 'reflecting'], to: 'reflecting' });
  }

  /** The reflection chose another cycle: the goal waits for its next plan job. */
  requeue(goalId: string, d: Decided): Promise<boolean> {
    return this.move(goalId, { from: ['reflecting'], to: 'queued', fields: decisionFields(d), events: [reflected(d)] });
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
      to: 'awaiting_human',
      fields: { ...decisionFields(d), pausedFor, reason },
      events: [reflected(d), paused],
    });
  }

  complete(goalId: string, d: Decided): Promise<boolean> {
    return this.move(goalId, {
      from: ['reflecting'],
      to: 'done',
      fields: { ...decisionFields(d), reason: d.reflection.reason },
      events: [reflected(d), { type: 'finished', status: 'done', step: d.step }],
    });
  }

  resume(goalId: string, step: number, action: string, resumes: number, note?: string): Promise<boolean> {
    return this.move(goalId, {
      from: ['awaiting_human'],
      to: 'queued',
      fields: { pausedFor: '', note: note ?? '', reason: '', resumes },
      events: [{ type: 'resumed', step, action, ...(note ? { note: note.slice(0, 500) } : {}) }],
    });
  }

  /** A reviewed `end` confirmed by a human. */
  approveEnd(goalId: string, step: number): Promise<boolean> {
    return this.move(goalId, {
      from: ['awaiting_human'],
      to: 'done',
      fields: { pausedFor: '' },
      events: [
        { type: 'resumed', step, action: 'end' },
        { type: 'finished', status: 'done', step },
      ],
    });
  }

  fail(goalId: string, reason: string, step?: number, from?: readonly GoalStatus[]): Promise<boolean> {
    return this.finish(goalId, 'failed', reason, step, from);
  }

  exceedBudget(goalId: string, reason: string, step?: number): Promise<boolean> {
    return this.finish(goalId, 'budget_exceeded', reason, step);
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
  ): Promise<boolean> {
    const finished: TimelineEventBody = { type: 'finished', status, reason, ...(step !== undefined ? { step } : {}) };
    return this.move(goalId, { from, to: status, fields: { reason }, events: [finished] });
  }

  private async move(goalId: string, m: Move, now = Date.now()): Promise<boolean> {
    const events = (m.events ?? []).map((e) => JSON.stringify({ ...e, at: now })).join('\n');
    const keys = [this.keys.goal(goalId), this.keys.events(goalId), this.keys.files(goalId), this.keys.content(goalId)];
    const prev = await runScript(this.redis, 'goalTransition', keys, [
      m.from?.join(',') || '*',
      m.to ?? '',
      now,
      JSON.stringify(encodeFields(m.fields ?? {})),
      events,
      this.opts.eventsMaxLen,
      this.opts.keyTtlSeconds,
      // Unique per call: a re-send of this very call (lost reply) is recognised as a replay.
      randomBytes(8).toString('hex'),
    ]);
    const moved = prev !== null && prev !== false;
    if (moved && m.to && m.to !== prev) this.opts.onStatus?.(m.to);
    return moved;
  }
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
  return { reflection: { ...d.reflection, step: d.step }, depth: d.step };
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
