// One agent run on behalf of a goal, the same for planner, reflector and subagents: build
// the agent from its spec, reserve each call's tokens and book its usage against the goal,
// end or pause the goal when a budget runs out (its `onBudget`), keep the transcript, and
// report a broken contract as data.
import type { Logger } from 'pino';
import { BudgetExceededError, LockLostError } from '../errors.ts';
import { releaseApprovals } from '../goal/approvals.ts';
import { GoalEndedError, type GoalUsage, goalCallBudget, goalUsage, onBudgetOf } from '../goal/budgets.ts';
import type { TimelineEventBody } from '../goal/events.ts';
import { isTerminal } from '../goal/status.ts';
import type { GoalRecord, ToolProgress } from '../goal/store.ts';
import type { Runtime } from '../runtime/runtime.ts';
import type { AgentCheckpoint } from './approval.ts';
import { type AgentRun, BudgetRefused, createAgent, type RunOptions, type ToolCallRecord } from './create-agent.ts';
import type { OutputContract } from './output-contracts.ts';
import { ModelCallError } from './providers/types.ts';
import type { AgentSpec } from './roles.ts';
import type { Tool } from './tools.ts';
import { storeTranscript, type TranscriptWrite, transcriptWrite } from './transcripts.ts';

export interface GoalRunOptions<T> {
  spec: AgentSpec;
  goal: Pick<GoalRecord, 'goalId' | 'budgets'> & { createdAt?: number };
  task: string;
  contract: OutputContract<T>;
  ctx: RunOptions['ctx'] & { threadId: string; step: number };
  log: Logger;
  tools?: Tool[];
  /** Each tool call's timeline event (`tool_called`), appended after the call has run. */
  toolCalled?: (call: ToolCallRecord) => TimelineEventBody;
  /** The job's checkpoint after a tool call, stored with its event (a subagent's: its redelivery goes on from it). */
  progress?: (checkpoint: AgentCheckpoint) => ToolProgress;
  /** Subagent workers hand a 429 to the queue (pausing the role fleet-wide); others wait it out. */
  rateLimitToQueue?: boolean;
  /** Tools that wait for a human, and a paused run to go on from (see RunOptions). */
  approval?: RunOptions['approval'];
  resume?: RunOptions['resume'];
  onResumedTurn?: RunOptions['onResumedTurn'];
  /** The most tokens this run may use (a plan's per-subtask cap); past it the run stops, partial. */
  tokenCap?: number;
  /**
   * An accepted run's transcript is the caller's to store with its own write (`transcript` in
   * the `ok` outcome), one script fewer; it must store it on its own (storeTranscript) when that
   * write does not happen. A rejected run's is stored here either way.
   */
  transcriptWithResult?: boolean;
  /** Told each model call's tokens, every kind, as they are booked (a subtask sums its own). */
  onTokens?: (tokens: number) => void;
}

export type GoalRunOutcome<T> =
  | { kind: 'ok'; value: T; run: AgentRun<T>; transcript?: TranscriptWrite }
  | { kind: 'rejected'; problem: string; run: AgentRun<T> }
  /** A budget ran out and the goal ended `budget_exceeded`. */
  | { kind: 'over_budget'; reason: string }
  /** A budget ran out and the goal waits for a human to raise it; the run goes on from `checkpoint`. */
  | { kind: 'paused'; reason: string; checkpoint: AgentCheckpoint }
  /** The goal ended (cancelled, or another run ended it) under this run. */
  | { kind: 'stopped'; reason: string; status: string };

export async function runForGoal<T>(rt: Runtime, o: GoalRunOptions<T>): Promise<GoalRunOutcome<T>> {
  const usage = goalUsage(rt, o.goal);
  const budget = goalCallBudget(rt, o.goal);
  const agent = createAgent(o.spec, {
    provider: rt.provider,
    logger: o.log,
    models: rt.cfg.models,
    metrics: rt.metrics,
    usageSink: (ctx, model, u, reservation, origin) => {
      // Every kind, as the token cap and the goal's totals count them (cache reads and writes too).
      o.onTokens?.(u.input + u.output + u.cache_read + u.cache_write);
      return usage.sink(ctx, model, u, reservation, origin);
    },
    // The previous call's usage is booked before the next call goes out.
    budget: { ...budget, reserve: (req, ctx) => usage.flush().then(() => budget.reserve(req, ctx)) },
    // A worker's job hands a failed call back to its queue; a plan or reflection failing fails the goal.
    retry: { ...rt.cfg.modelRetry, rateLimitToQueue: o.rateLimitToQueue ?? false, patient: !o.rateLimitToQueue },
    toolResultMaxChars: rt.cfg.vfs.toolResultMaxChars,
  });
  let run: AgentRun<T>;
  try {
    run = await agent.run<T>({
      task: o.task,
      tools: o.tools,
      contract: o.contract,
      ctx: o.ctx,
      onToolCall: o.toolCalled && ((call, progress) => recordToolCall(rt, o, usage, call, progress)),
      onToolStart: o.progress && ((checkpoint) => storeToolStart(rt, o, checkpoint)),
      approval: o.approval,
      resume: o.resume,
      onResumedTurn: o.onResumedTurn,
      tokenCap: o.tokenCap,
    });
  } catch (err) {
    await usage.flush(); // the calls made before it stopped are booked, however it stopped
    return atBudget(rt, o, err);
  }
  // The run's last call is booked with its transcript, in one script.
  const w = transcriptWrite(rt, o.goal.goalId, o.ctx.threadId, o.ctx.role, run.messages, usage.takePending());
  const transcript = o.transcriptWithResult && run.ok ? w : undefined;
  if (!transcript) await storeTranscript(rt, w);
  if (!run.ok) return { kind: 'rejected', problem: run.problem ?? 'failed', run };
  return { kind: 'ok', value: run.value as T, run, transcript };
}

/**
 * A tool call's event goes out with the waiting usage record of the model call that asked for it
 * and the run's checkpoint after the call (one request). Not awaited: the turn need not wait, the
 * next call's flush waits for it, and the writes land in order (a lost one: more is run again).
 */
function recordToolCall<T>(
  rt: Runtime,
  o: GoalRunOptions<T>,
  usage: GoalUsage,
  call: ToolCallRecord,
  checkpoint?: AgentCheckpoint,
): void {
  o.log.debug(call, 'tool call');
  const event = o.toolCalled!(call);
  const progress = checkpoint && o.progress?.(checkpoint);
  void usage
    .carry((args) => rt.goals.toolCalled(o.goal.goalId, event, args, progress))
    .catch((err) => o.log.warn({ err }, 'could not append a tool_called event'));
}

/**
 * The checkpoint marking an at-most-once call started, stored before the call goes out. A write
 * refused for not following the stored one is sent once more whole; refused again, the job's
 * lock is another run's, which does the call if anyone does: this run stops.
 */
async function storeToolStart<T>(rt: Runtime, o: GoalRunOptions<T>, checkpoint: AgentCheckpoint): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const stored = await rt.goals.toolStart(o.goal.goalId, o.progress!(checkpoint));
    if (stored === 'stored') return;
    if (stored === 'gone') throw new GoalEndedError('gone');
  }
  throw new LockLostError('the job is taken by another worker: an at-most-once tool call was not made');
}

/** A run stopped by its goal's budget (or the goal's end): pause or end the goal, as it asks. */
async function atBudget<T>(rt: Runtime, o: GoalRunOptions<T>, err: unknown): Promise<GoalRunOutcome<T>> {
  if (err instanceof GoalEndedError) return { kind: 'stopped', reason: err.message, status: err.status };
  // A call aborted because its goal ended (a cancel reached it): the run stops, no failure to retry.
  if (err instanceof ModelCallError && err.kind === 'aborted') {
    const status = await rt.redis.hget(rt.goals.keys.goal(o.goal.goalId), 'status');
    if (status && isTerminal(status)) return { kind: 'stopped', reason: `the goal is ${status}`, status };
  }
  const hit = err instanceof BudgetRefused ? err.hit : err;
  if (!(hit instanceof BudgetExceededError)) throw err;
  const { goalId } = o.goal;
  if (onBudgetOf(o.goal) === 'pause' && err instanceof BudgetRefused) {
    // Refused when another run paused the goal first: it is paused already, nothing to move.
    await rt.lifecycle.pauseForBudget(goalId, { kind: hit.kind, reason: hit.message, need: hit.need }, o.ctx.step);
    o.log.info({ reason: hit.message }, 'budget reached: the goal waits for a human to raise it');
    return { kind: 'paused', reason: hit.message, checkpoint: err.checkpoint };
  }
  // Calls of sibling subtasks waiting for a human are cancelled and their jobs woken (they end
  // as skipped), as at the time budget's end: no approval of an ended goal is left to take.
  if (await rt.lifecycle.exceedBudget(goalId, hit.message, o.ctx.step, hit.kind))
    await releaseApprovals(rt, goalId, `the goal ended budget_exceeded: ${hit.message}`);
  return { kind: 'over_budget', reason: hit.message };
}
