// The goal's own hash, its timeline stream and the goals index.
import type { Redis } from 'ioredis';
import type { BudgetKind } from '../errors.ts';
import { UnknownGoalError } from '../errors.ts';
import { runScript } from '../runtime/scripts.ts';
import type { Budgets } from './budgets.ts';
import type { CheckpointArgs } from './checkpoints.ts';
import {
  type PausedFor,
  storedEvent,
  type TimelineEntry,
  type TimelineEvent,
  type TimelineEventBody,
} from './events.ts';
import { newOperationId } from './ids.ts';
import { Keys } from './keys.ts';
import type { Plan, Reflection } from './plan.ts';
import type { CycleOutcome, ProgressEntry } from './progress.ts';
import type { GoalStatus } from './status.ts';

export const TOKEN_KINDS = ['input', 'output', 'cache_read', 'cache_write'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];
export type Usage = Record<TokenKind, number>;
/** Where a response's usage came from: the model id it was requested as, and whether it is an estimate. */
export interface UsageOrigin {
  requested?: string;
  estimated?: boolean;
}

export interface GoalRecord {
  goalId: string;
  goal: string;
  status: GoalStatus;
  step: number;
  depth: number;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  reason: string | null;
  review: boolean;
  budgets: Budgets;
  plan: Plan | null;
  planStep: number;
  reflection: (Reflection & { step: number }) | null;
  note: string | null;
  pausedFor: PausedFor | null;
  /** The status a budget pause interrupted: `deepq resume` goes back to it. */
  pausedFrom: GoalStatus | null;
  /** The budget that ran out in a budget pause: the one a resume must raise. */
  pausedBudget: BudgetKind | null;
  /** At a token budget pause, the tokens the refused call needed (null: not known). */
  pausedNeed: number | null;
  /** The last reflected cycle's subtasks: what the next planner is told (failures with reasons). */
  outcomes: CycleOutcome[];
  /** The stall detector's record of the last cycles (shared/goal/progress.ts). */
  progress: ProgressEntry[];
  /** Subtasks dispatched so far, per role: the planner's cost per subtask divides by it. */
  subtasksByRole: Record<string, number>;
  /** How many times a human resumed it: the plan job id's attempt suffix. */
  resumes: number;
  /** How many times it paused for a human: a resume answers this pause, not a later one. */
  pauses: number;
  tokens: Usage;
  /** Per `<role>|<model>`, each kind. */
  usage: Record<string, Usage>;
  /** A model id a response reported → the configured id it was requested as (when they differ). */
  requestedAs: Record<string, string>;
  /** `<role>|<model>` keys whose usage was estimated (the endpoint reported none) at least once. */
  estimatedUsage: string[];
}

/** What a subtask reads of its goal (GoalStore.getBrief). */
export type GoalBrief = Pick<GoalRecord, 'goalId' | 'goal' | 'status' | 'budgets' | 'createdAt' | 'pausedFor'>;

/** One call's usage as lua/includes/addUsage.lua reads it (usageAdd.lua, transcriptSave.lua). */
export function usageArgs(
  role: string,
  model: string,
  usage: Usage,
  reservation?: string,
  origin: UsageOrigin = {},
): (string | number)[] {
  const requested = origin.requested && origin.requested !== model ? origin.requested : '';
  const kinds = TOKEN_KINDS.map((k) => usage[k] ?? 0);
  // The operation id makes a re-send of this record (a lost reply) book nothing.
  return [reservation ?? '', `${role}|${model}`, ...kinds, requested, origin.estimated ? '1' : '', newOperationId()];
}

/** A job's checkpoint after a tool call, stored while `lock` (the job's lock key and its run's token) holds. */
export interface ToolProgress {
  jobId: string;
  /** The write of the JobCheckpoint (shared/goal/checkpoints.ts). */
  checkpoint: CheckpointArgs;
  lock: { key: string; token: string };
  /** Called when the write was not stored: the run's next write is whole. */
  unstored(): void;
}

/** toolCalled.lua's usage arguments when the call's usage is booked already. */
const NO_USAGE = Array<string>(9).fill('');

export interface GoalStoreOptions {
  keyTtlSeconds: number;
  eventsMaxLen: number;
}

/** A goal stored by createOrFind, or the one that had its id already (its request, its status). */
export type CreatedGoal = { created: true } | { created: false; request: string; status: GoalStatus };

export class GoalStore {
  readonly keys: Keys;
  constructor(
    readonly redis: Redis,
    prefix: string,
    readonly opts: GoalStoreOptions,
  ) {
    this.keys = new Keys(prefix);
  }

  /** Stores a new goal, queued (lua/goalCreate.lua). Returns false if it already existed. */
  async create(goalId: string, goal: string, budgets: Budgets, review: boolean): Promise<boolean> {
    return (await this.createOrFind(goalId, goal, budgets, review)).created;
  }

  /**
   * Stores a new goal, queued, with the names of the files it starts with in its `created` event,
   * its request's fingerprint (an idempotent submission's) and the first goal id of its key
   * (`keyOf`: the sweep counts the key's generations by it); or finds the goal that has its id.
   */
  async createOrFind(
    goalId: string,
    goal: string,
    budgets: Budgets,
    review: boolean,
    extra: { inputs?: { name: string; bytes: number }[]; request?: string; keyOf?: string } = {},
  ): Promise<CreatedGoal> {
    const now = Date.now();
    const inputs = extra.inputs?.length ? { inputs: extra.inputs } : {};
    const event: TimelineEvent = { type: 'created', at: now, goal: goal.slice(0, 200), ...inputs };
    const keys = [this.keys.goal(goalId), this.keys.events(goalId), this.keys.goalsIndex(), this.keys.liveGoals()];
    const args = [goalId, now, goal, review ? '1' : '0', JSON.stringify(budgets), JSON.stringify(event)];
    const [created, request, status] = (await runScript(this.redis, 'goalCreate', keys, [
      ...args,
      this.opts.eventsMaxLen,
      this.opts.keyTtlSeconds,
      extra.request ?? '',
      extra.keyOf ?? '',
    ])) as [number, string?, string?];
    if (created === 1) return { created: true };
    return { created: false, request: request ?? '', status: status as GoalStatus };
  }

  async get(goalId: string): Promise<GoalRecord | null> {
    const h = await this.redis.hgetall(this.keys.goal(goalId));
    if (!h.status) return null;
    return parseGoal(goalId, h);
  }

  /**
   * The few fields a subtask reads (its status, text, budgets and age), not the whole hash: the
   * plan, outcomes, progress and per-model usage grow with the goal and a subtask uses none.
   */
  async getBrief(goalId: string): Promise<GoalBrief | null> {
    const fields = await this.redis.hmget(
      this.keys.goal(goalId),
      'status',
      'goal',
      'budgets',
      'createdAt',
      'pausedFor',
    );
    return briefOf(goalId, fields);
  }

  /**
   * getBrief for a subtask's first start, with its `subtask_started` event appended in the same
   * script (lua/subtaskStart.lua) unless the goal ended or waits at a budget.
   */
  async startSubtask(goalId: string, started: TimelineEventBody): Promise<GoalBrief | null> {
    const keys = [this.keys.goal(goalId), this.keys.events(goalId)];
    const fields = await runScript(this.redis, 'subtaskStart', keys, [storedEvent(started), this.opts.eventsMaxLen]);
    return briefOf(goalId, fields as (string | null)[]);
  }

  async mustGet(goalId: string): Promise<GoalRecord> {
    const g = await this.get(goalId);
    if (!g) throw new UnknownGoalError(goalId);
    return g;
  }

  /**
   * A tool call's event, with the usage of the model call that asked for it when that is not
   * booked yet (usageArgs) and the run's checkpoint after the call (progress; stored while the
   * job's lock is the run's): one request for all (lua/toolCalled.lua).
   */
  async toolCalled(
    goalId: string,
    event: TimelineEventBody,
    usage?: (string | number)[],
    progress?: ToolProgress,
  ): Promise<void> {
    if (!usage && !progress) return this.appendEvent(goalId, event);
    const k = this.keys;
    const keys = [k.goal(goalId), k.reservations(goalId), k.events(goalId), k.checkpoints(goalId)];
    const saved = progress ? [progress.jobId, progress.lock.token] : ['', ''];
    const args = [storedEvent(event), this.opts.eventsMaxLen, usage ? '1' : '0', ...saved, this.opts.keyTtlSeconds];
    const lockKey = progress?.lock.key ?? k.goal(goalId);
    const reply = await runScript(
      this.redis,
      'toolCalled',
      [...keys, lockKey],
      [...args, ...(usage ?? NO_USAGE), ...(progress?.checkpoint ?? [])],
    ).catch((err) => {
      progress?.unstored();
      throw err;
    });
    if (reply !== 1) progress?.unstored();
  }

  /**
   * Stores the checkpoint that marks an at-most-once tool call started, before the call goes out
   * (lua/toolStart.lua): 'stored'; 'refused' when the lock is not the run's or the write does not
   * follow the stored one (the writer's next write is whole); 'gone' for a goal that is gone.
   */
  async toolStart(goalId: string, progress: ToolProgress): Promise<'stored' | 'refused' | 'gone'> {
    const keys = [this.keys.goal(goalId), this.keys.checkpoints(goalId), progress.lock.key];
    const args = [progress.jobId, progress.lock.token, this.opts.keyTtlSeconds, ...progress.checkpoint];
    const reply = await runScript(this.redis, 'toolStart', keys, args).catch((err) => {
      progress.unstored();
      throw err;
    });
    if (reply !== 1) progress.unstored();
    return reply === 1 ? 'stored' : reply === 0 ? 'gone' : 'refused';
  }

  /**
   * A subtask's failure for good, appended once (lua/subtaskFailed.lua): by the worker that saw
   * it (`whileRunning`: only while the goal runs that cycle), else by the reflector once the
   * cycle's reflection began. True when appended.
   */
  async subtaskFailed(
    goalId: string,
    event: TimelineEventBody & { type: 'subtask_failed' },
    whileRunning: boolean,
  ): Promise<boolean> {
    const keys = [this.keys.goal(goalId), this.keys.events(goalId)];
    const { eventsMaxLen } = this.opts;
    const args = [storedEvent(event), eventsMaxLen, event.step, event.index, whileRunning ? '1' : '0'];
    return (await runScript(this.redis, 'subtaskFailed', keys, args)) === 1;
  }

  async appendEvent(goalId: string, event: TimelineEventBody): Promise<void> {
    await this.redis.xadd(
      this.keys.events(goalId),
      'MAXLEN',
      '~',
      this.opts.eventsMaxLen,
      '*',
      'e',
      storedEvent(event),
    );
  }

  async events(goalId: string, afterId = '-', count = 1000): Promise<TimelineEntry[]> {
    const start = afterId === '-' ? '-' : `(${afterId}`;
    const rows = await this.redis.xrange(this.keys.events(goalId), start, '+', 'COUNT', count);
    return rows.map(([id, fields]) => ({ id, event: JSON.parse(fields[1] ?? '{}') as TimelineEvent }));
  }

  /**
   * Adds model usage to the goal's totals and ends the call's token reservation (its member in
   * the reservations set) in one script (lua/usageAdd.lua). False when the goal is gone; true
   * too for a re-send of a record already booked (a lost reply), which books nothing.
   */
  async addUsage(
    goalId: string,
    role: string,
    model: string,
    usage: Usage,
    reservation?: string,
    origin: UsageOrigin = {},
  ): Promise<boolean> {
    return this.recordUsage(goalId, usageArgs(role, model, usage, reservation, origin));
  }

  /** addUsage with its arguments already built (usageArgs). */
  async recordUsage(goalId: string, args: (string | number)[]): Promise<boolean> {
    const keys = [this.keys.goal(goalId), this.keys.reservations(goalId)];
    return (await runScript(this.redis, 'usageAdd', keys, args)) !== 0;
  }

  /**
   * The newest goals first, at most `limit` (1000). With `status`, the newest `limit` in that
   * status: the index is read a page at a time until enough match, so a goal older than the
   * newest `limit` (one still awaiting a human, say) is found too.
   */
  async list(opts: { status?: string; limit?: number } = {}): Promise<GoalRecord[]> {
    const limit = opts.limit ?? 1000;
    const out: GoalRecord[] = [];
    // Goals created while paging shift the index: a goal seen on one page may be on the next.
    const seen = new Set<string>();
    for (let start = 0; out.length < limit; start += LIST_PAGE) {
      const ids = await this.redis.zrevrange(this.keys.goalsIndex(), start, start + LIST_PAGE - 1);
      const fresh = ids.filter((id) => !seen.has(id));
      for (const id of fresh) seen.add(id);
      for (const id of opts.status ? await this.inStatus(fresh, opts.status) : fresh) {
        const g = await this.get(id);
        if (g && (!opts.status || g.status === opts.status)) out.push(g);
        if (out.length >= limit) break;
      }
      if (ids.length < LIST_PAGE) break;
    }
    return out;
  }

  /** Those of `ids` whose goal is in `status` now (its status field alone, not the record). */
  private async inStatus(ids: string[], status: string): Promise<string[]> {
    const statuses = await Promise.all(ids.map((id) => this.redis.hget(this.keys.goal(id), 'status')));
    return ids.filter((_, i) => statuses[i] === status);
  }
}

/** Goal ids read from the index per request when listing. */
const LIST_PAGE = 500;

/** A brief from its fields in getBrief's order; null when the goal is gone. */
function briefOf(goalId: string, fields: (string | null)[]): GoalBrief | null {
  const [status, goal, budgets, createdAt, pausedFor] = fields;
  if (!status) return null;
  return {
    goalId,
    status: status as GoalStatus,
    goal: goal ?? '',
    budgets: json<Budgets>(budgets ?? undefined) ?? {},
    createdAt: Number(createdAt ?? 0),
    pausedFor: (pausedFor as GoalRecord['pausedFor']) || null,
  };
}

export function totalTokens(u: Usage): number {
  return TOKEN_KINDS.reduce((s, k) => s + (u[k] ?? 0), 0);
}

function json<T>(s: string | undefined): T | null {
  if (!s) return null;
  try {
    return JSON.parse(s) as T;
  } catch {
    return null;
  }
}

export function parseGoal(goalId: string, h: Record<string, string>): GoalRecord {
  // The per-kind totals are the sums of the `<role>|<model>` counts (usageAdd.lua keeps only a
  // grand total beside them); a goal counted before that kept `tokens.<kind>` and the same counts.
  const tokens: Usage = { input: 0, output: 0, cache_read: 0, cache_write: 0 };
  const usage: Record<string, Usage> = {};
  for (const [field, value] of Object.entries(h)) {
    if (!field.startsWith('usage.')) continue;
    const m = /^usage\.(.+)\.(input|output|cache_read|cache_write)$/.exec(field);
    if (!m) continue;
    usage[m[1]!] ??= { input: 0, output: 0, cache_read: 0, cache_write: 0 };
    usage[m[1]!]![m[2] as TokenKind] = Number(value);
    tokens[m[2] as TokenKind] += Number(value);
  }
  return {
    goalId,
    goal: h.goal ?? '',
    status: h.status as GoalStatus,
    step: Number(h.step ?? 0),
    depth: Number(h.depth ?? 0),
    createdAt: Number(h.createdAt ?? 0),
    updatedAt: Number(h.updatedAt ?? 0),
    finishedAt: h.finishedAt ? Number(h.finishedAt) : null,
    reason: h.reason || null,
    review: h.review === '1',
    budgets: json<Budgets>(h.budgets) ?? {},
    plan: json<Plan>(h.plan),
    planStep: Number(h.planStep ?? 0),
    reflection: json<Reflection & { step: number }>(h.reflection),
    note: h.note || null,
    pausedFor: (h.pausedFor as GoalRecord['pausedFor']) || null,
    pausedFrom: (h.pausedFrom as GoalStatus) || null,
    pausedBudget: (h.pausedBudget as BudgetKind) || null,
    pausedNeed: h.pausedNeed ? Number(h.pausedNeed) : null,
    outcomes: json<CycleOutcome[]>(h.outcomes) ?? [],
    progress: json<ProgressEntry[]>(h.progress) ?? [],
    subtasksByRole: json<Record<string, number>>(h.subtasksByRole) ?? {},
    resumes: Number(h.resumes ?? 0),
    pauses: Number(h.pauses ?? 0),
    tokens,
    usage,
    ...usageOrigins(h),
  };
}

/** The `requested.<model>` and `estimated.<role>|<model>` fields addUsage writes. */
function usageOrigins(h: Record<string, string>): Pick<GoalRecord, 'requestedAs' | 'estimatedUsage'> {
  const requestedAs: Record<string, string> = {};
  const estimatedUsage: string[] = [];
  for (const [field, value] of Object.entries(h)) {
    if (field.startsWith('requested.')) requestedAs[field.slice('requested.'.length)] = value;
    else if (field.startsWith('estimated.')) estimatedUsage.push(field.slice('estimated.'.length));
  }
  return { requestedAs, estimatedUsage };
}
