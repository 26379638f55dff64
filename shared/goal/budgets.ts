// Per-goal budgets (tokens, steps, seconds). Steps and seconds are checked before each
// dispatch (and seconds by the deadline job); tokens are reserved before each model call:
// the call's max output tokens plus an estimate of its input must fit in what remains after
// the calls in flight took theirs (lua/budgetReserve.lua; a call that fits once they end waits
// for them), so output never overshoots and a goal passes its limit by at most its in-flight
// calls' estimation error. The estimate is
// characters / 4, scaled by the ratio the goal's last reserved call showed between its real
// input count and its estimate (`inputRatio`: the tokenizer, learned). What then happens is
// the goal's `onBudget`: `end` (budget_exceeded, artifacts kept) or `pause` (awaiting_human
// until `deepq resume --max-tokens N` raises it; shared/goal/parking.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { UsageSink } from '../agent/middleware/index.ts';
import { RATE_LIMIT_RETRIES } from '../agent/middleware/retry.ts';
import type { CallBudget } from '../agent/middleware/types.ts';
import { metricLabelsOf } from '../agent/providers/model-labels.ts';
import { canonicalModel } from '../agent/providers/model-ref.ts';
import { longestCallMs, usedProviders } from '../agent/providers/settings.ts';
import { estimateInputTokens, MIN_CALL_TOKENS, type ModelRequest } from '../agent/providers/types.ts';
import { BudgetExceededError, type BudgetKind } from '../errors.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { runScript } from '../runtime/scripts.ts';
import { newOperationId } from './ids.ts';
import type { GoalRecord } from './store.ts';
import { TOKEN_KINDS, totalTokens, usageArgs } from './store.ts';

export const ON_BUDGET = ['end', 'pause'] as const;
export type OnBudget = (typeof ON_BUDGET)[number];

/**
 * The longest time budget, in seconds (ten years): its deadline is a delayed job, and a delay
 * past what a timer can hold (1e306 s is Infinity in ms) failed in BullMQ's script after the
 * goal was stored. cli/args.ts bounds `--max-seconds` by the same figure.
 */
export const MAX_BUDGET_SECONDS = 315_360_000;

/** A goal's limits; each is optional. Set per goal, with defaults from the config. */
export const BudgetsSchema = z
  .object({
    maxTokens: z.number().int().positive().optional(),
    maxSteps: z.number().int().positive().optional(),
    maxSeconds: z.number().positive().max(MAX_BUDGET_SECONDS, `at most ${MAX_BUDGET_SECONDS} (ten years)`).optional(),
    /** At a limit: end the goal `budget_exceeded` (the default) or pause it for a human. */
    onBudget: z.enum(ON_BUDGET).optional(),
  })
  // A misspelt limit (maxToken) is refused, not dropped: dropped, the goal ran without the limit.
  .strict();
export type Budgets = z.infer<typeof BudgetsSchema>;

/** What is left of a goal's token and time budgets at `now` (each when set), as its planner and reflector are told. */
export function budgetLeft(
  goal: Pick<GoalRecord, 'budgets' | 'tokens' | 'createdAt'>,
  now: number,
): { tokens?: string; seconds?: string } {
  const { maxTokens, maxSeconds } = goal.budgets;
  const left: { tokens?: string; seconds?: string } = {};
  if (maxTokens !== undefined)
    left.tokens = `tokens ${Math.max(0, maxTokens - totalTokens(goal.tokens))} of ${maxTokens}`;
  if (maxSeconds !== undefined) {
    left.seconds = `seconds ${Math.max(0, maxSeconds - (now - goal.createdAt) / 1000).toFixed(0)} of ${maxSeconds}`;
  }
  return left;
}

export interface BudgetHit {
  kind: BudgetKind;
  reason: string;
  /** Tokens the call refused at a token budget needed: a raise must leave at least that. */
  need?: number;
}

export function onBudgetOf(goal: Pick<GoalRecord, 'budgets'>): OnBudget {
  return goal.budgets.onBudget ?? 'end';
}

export function budgetProblem(
  goal: GoalRecord,
  opts: { nextStep?: number; now?: number; tokens?: number } = {},
): BudgetHit | null {
  const b = goal.budgets;
  const tokens = opts.tokens ?? totalTokens(goal.tokens);
  if (b.maxTokens !== undefined && tokens >= b.maxTokens)
    return { kind: 'tokens', reason: `token budget exceeded: ${tokens} tokens used (max ${b.maxTokens})` };
  if (b.maxSteps !== undefined && opts.nextStep !== undefined && opts.nextStep > b.maxSteps)
    return {
      kind: 'steps',
      reason: `step budget exceeded: step ${opts.nextStep} would pass the limit of ${b.maxSteps}`,
    };
  const elapsed = ((opts.now ?? Date.now()) - goal.createdAt) / 1000;
  if (b.maxSeconds !== undefined && elapsed > b.maxSeconds) return secondsHit(elapsed, b.maxSeconds);
  return null;
}

function secondsHit(elapsed: number, max: number): BudgetHit {
  return { kind: 'seconds', reason: `time budget exceeded: ${elapsed.toFixed(1)} s elapsed (max ${max} s)` };
}

/**
 * How long a reservation may outlive its call: every attempt taking as long as a call may, with
 * backoff between, at the slowest provider (a streamed answer's whole-call limit, or the timeout of
 * one sent whole: a reservation that lapsed under its call would let other calls spend its share).
 */
export function reservationTtlMs(cfg: Runtime['cfg']): number {
  const known = reservationTtls.get(cfg);
  if (known !== undefined) return known;
  const ttl = longestReservationMs(cfg);
  reservationTtls.set(cfg, ttl);
  return ttl;
}

/** Per config object: the walk over its model refs is not redone for every reservation. */
const reservationTtls = new WeakMap<Runtime['cfg'], number>();

function longestReservationMs(cfg: Runtime['cfg']): number {
  // A rate limit (and, for the planner and reflector, an outage) is retried in place more often.
  const retries = Math.max(cfg.modelRetry.maxRetries, RATE_LIMIT_RETRIES);
  const attempts = retries + 1;
  const used = usedProviders(cfg).map((name) => longestCallMs(cfg, cfg.providers[name]));
  const slowest = Math.max(cfg.modelTimeoutMs, ...used);
  return attempts * slowest + retries * cfg.modelRetry.maxDelayMs + 10_000;
}

/**
 * The token middleware's reservation against the goal's budgets (lua/budgetReserve.lua). A goal
 * without a token budget has nothing to reserve: its time budget is checked here, and a cancel
 * reaches the call through its abort signal, so no Redis round trip is needed per call.
 */
export function goalCallBudget(rt: Runtime, goal: Pick<GoalRecord, 'goalId' | 'budgets'> & { createdAt?: number }) {
  const keys = [rt.goals.keys.goal(goal.goalId), rt.goals.keys.reservations(goal.goalId)];
  const { maxTokens, maxSeconds } = goal.budgets;
  let local = maxTokens === undefined && (maxSeconds === undefined || goal.createdAt !== undefined);
  const budget: CallBudget = {
    async reserve(req, ctx) {
      if (local) {
        try {
          return withinTime(goal.createdAt, maxSeconds, req.max_tokens);
        } catch (err) {
          // Past the deadline this run read at its start: a human may have raised it since (a
          // resume while this call's run went on). The goal's own budgets decide from here.
          if (!(err instanceof BudgetExceededError)) throw err;
          local = false;
        }
      }
      // Refused only because calls in flight hold the rest (parallel subagents): they end soon and
      // give back what they did not spend, so this call waits for them rather than end the goal.
      for (let wait = FIRST_BUSY_WAIT_MS; ; wait = Math.min(wait * 2, MAX_BUSY_WAIT_MS)) {
        const reply = await reserveOnce(rt, keys, req);
        if (reply[0] !== 'busy') return grantOf(reply, req.max_tokens);
        await sleep(wait, undefined, { signal: ctx.signal });
      }
    },
    async release(member) {
      await rt.redis.zrem(keys[1]!, member);
    },
    async calibrate(req, inputTokens) {
      // Never below 1: an estimate that errs high only leaves some budget unused.
      const ratio = Math.max(1, inputTokens / Math.max(1, estimateInputTokens(req)));
      await rt.redis.hset(keys[0]!, 'inputRatio', ratio.toFixed(3));
    },
  };
  return budget;
}

const FIRST_BUSY_WAIT_MS = 20;
const MAX_BUSY_WAIT_MS = 500;

async function reserveOnce(rt: Runtime, keys: string[], req: ModelRequest): Promise<(string | number)[]> {
  const now = Date.now();
  const wanted = req.max_tokens;
  // A call that can have fewer output tokens than it asked for still runs, down to the floor.
  const floor = Math.min(wanted, MIN_CALL_TOKENS);
  const args = [newOperationId(), wanted, estimateInputTokens(req), floor];
  args.push(now, now + reservationTtlMs(rt.cfg), rt.cfg.goalKeyTtlSeconds);
  return (await runScript(rt.redis, 'budgetReserve', keys, args)) as (string | number)[];
}

function withinTime(createdAt: number | undefined, maxSeconds: number | undefined, wanted: number) {
  const elapsed = (Date.now() - (createdAt ?? 0)) / 1000;
  if (maxSeconds !== undefined && elapsed > maxSeconds) {
    throw new BudgetExceededError(secondsHit(elapsed, maxSeconds).reason, 'seconds');
  }
  return { maxTokens: wanted, member: '' };
}

/** The script's reply as a grant, or the reason no call may be made, thrown. */
function grantOf(reply: (string | number)[], wanted: number): { maxTokens: number; member: string } {
  const [kind, a, b, c, d, e] = reply;
  if (kind === 'ok') return { maxTokens: Number(a ?? wanted), member: String(b ?? '') };
  if (kind === 'paused') throw new BudgetExceededError('the goal is paused at its budget', 'tokens');
  if (kind === 'seconds') {
    const hit = secondsHit(Number(a) / 1000, Number(b));
    throw new BudgetExceededError(hit.reason, 'seconds');
  }
  if (kind === 'tokens') {
    const [used, reserved, max] = [Number(a), Number(b), Number(c)];
    const inFlight = reserved ? ` and ${reserved} reserved by calls in flight` : '';
    // What the next call needs, named: "332 used, too few left (max 1200)" read as a bug.
    const needs = d === undefined ? '' : ` (the next call needs about ${d} input and ${e} output)`;
    const tooFew = `too few left for another call (max ${max})`;
    const need = d === undefined ? undefined : Number(d) + Number(e);
    const reason = `token budget exceeded: ${used} tokens used${inFlight}${needs}, ${tooFew}`;
    throw new BudgetExceededError(reason, 'tokens', need);
  }
  // Gone or ended: the goal stopped under this call (cancelled, or another call ended it).
  throw new GoalEndedError(kind === 'ended' ? String(a) : 'gone');
}

/** A call refused because its goal has already ended: the caller stops as for a cancel. */
export class GoalEndedError extends Error {
  override name = 'GoalEndedError';
  constructor(readonly status: string) {
    super(`the goal is ${status}`);
  }
}

/**
 * Where a run's model usage goes: metrics at once, and the goal's totals in Redis. With a token
 * budget each call's record is written at once (the next reservation must see it). Without
 * one, a call's record waits a little: `flush` writes it before the next call goes out (and
 * when a run stops without a transcript), and the run's last call is written with its
 * transcript (`takePending`): one script per run fewer. A tool call the record's call asked for
 * takes it along in its own write (`carry`): one request per tool turn fewer.
 */
export interface GoalUsage {
  sink: UsageSink;
  takePending(): (string | number)[] | undefined;
  flush(): Promise<void>;
  /**
   * Hands the waiting record (if any) to `write`, which must book it; `flush` waits for it. A
   * write that fails gives its record back, for the next flush to book.
   */
  carry(write: (usage: (string | number)[] | undefined) => Promise<unknown>): Promise<void>;
}

export function goalUsage(rt: Runtime, goal: Pick<GoalRecord, 'goalId' | 'budgets'>): GoalUsage {
  const deferred = goal.budgets.maxTokens === undefined;
  let pending: (string | number)[] | undefined;
  let carried: Promise<unknown> = Promise.resolve();
  const takePending = () => {
    const args = pending;
    pending = undefined;
    return args;
  };
  const flush = async () => {
    await carried;
    const args = takePending();
    if (args) await rt.goals.recordUsage(goal.goalId, args);
  };
  const carry = (write: (usage: (string | number)[] | undefined) => Promise<unknown>) => {
    const args = takePending();
    const done = carried.then(() => write(args));
    // No call goes out before the next flush, which waits for this: nothing else is pending then.
    carried = done.catch(() => {
      if (args) pending ??= args;
    });
    return done.then(() => {});
  };
  const sink: UsageSink = async (ctx, model, usage, reservation, origin) => {
    // The label is a configured model or `other`, never whatever id an endpoint returned.
    const label = metricLabelsOf(rt.provider, origin?.requested ?? model, model).model;
    for (const kind of TOKEN_KINDS)
      if (usage[kind]) rt.metrics.llmTokens.inc({ model: label, role: ctx.role, kind }, usage[kind]);
    const requested = origin?.requested === undefined ? undefined : canonicalModel(origin.requested);
    const args = usageArgs(ctx.role, model, usage, reservation, { ...origin, requested });
    await flush();
    if (deferred) pending = args;
    else await rt.goals.recordUsage(goal.goalId, args);
  };
  return { sink, takePending, flush, carry };
}

/** When a goal's time budget ends (ms; it counts from the goal's creation), or undefined without one. */
export function timeBudgetEnd(goal: { createdAt: number; budgets: Pick<Budgets, 'maxSeconds'> }): number | undefined {
  const { maxSeconds } = goal.budgets;
  return maxSeconds === undefined ? undefined : goal.createdAt + maxSeconds * 1000;
}
