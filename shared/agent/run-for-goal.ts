// One agent run on behalf of a goal, the same for planner, reflector and subagents: build
// the agent from its spec, book usage against the goal (and its token budget), end the goal
// when the budget runs out, keep the transcript, and report a broken contract as data.
import type { Logger } from 'pino';
import { BudgetExceededError } from '../errors.ts';
import { goalUsageSink } from '../goal/budgets.ts';
import type { GoalRecord } from '../goal/store.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { type AgentRun, createAgent, type RunOptions } from './create-agent.ts';
import type { OutputContract } from './output-contracts.ts';
import type { AgentSpec } from './roles.ts';
import type { Tool } from './tools.ts';
import { saveTranscript } from './transcripts.ts';

export interface GoalRunOptions<T> {
  spec: AgentSpec;
  goal: Pick<GoalRecord, 'goalId' | 'budgets'>;
  task: string;
  contract: OutputContract<T>;
  ctx: RunOptions['ctx'] & { threadId: string; step: number };
  log: Logger;
  tools?: Tool[];
  /** After each tool call (see RunOptions.onToolCall). */
  onToolCall?: RunOptions['onToolCall'];
  /** Subagent workers hand a 429 to the queue (pausing the role fleet-wide); others wait it out. */
  rateLimitToQueue?: boolean;
  /** Tools that wait for a human, and a paused run to go on from (see RunOptions). */
  approval?: RunOptions['approval'];
  resume?: RunOptions['resume'];
}

export type GoalRunOutcome<T> =
  | { kind: 'ok'; value: T; run: AgentRun<T> }
  | { kind: 'rejected'; problem: string; run: AgentRun<T> }
  | { kind: 'over_budget'; reason: string };

export async function runForGoal<T>(rt: Runtime, o: GoalRunOptions<T>): Promise<GoalRunOutcome<T>> {
  const agent = createAgent(o.spec, {
    provider: rt.provider,
    logger: o.log,
    models: rt.cfg.models,
    metrics: rt.metrics,
    usageSink: goalUsageSink(rt, o.goal),
    retry: { ...rt.cfg.modelRetry, rateLimitToQueue: o.rateLimitToQueue ?? false },
    toolResultMaxChars: rt.cfg.vfs.toolResultMaxChars,
  });
  let run: AgentRun<T>;
  try {
    run = await agent.run<T>({
      task: o.task,
      tools: o.tools,
      contract: o.contract,
      ctx: o.ctx,
      onToolCall: o.onToolCall,
      approval: o.approval,
      resume: o.resume,
    });
  } catch (err) {
    if (!(err instanceof BudgetExceededError)) throw err;
    await rt.lifecycle.exceedBudget(o.goal.goalId, err.message, o.ctx.step);
    return { kind: 'over_budget', reason: err.message };
  }
  await saveTranscript(rt, o.goal.goalId, o.ctx.threadId, o.ctx.role, run.messages);
  if (!run.ok) return { kind: 'rejected', problem: run.problem ?? 'failed', run };
  return { kind: 'ok', value: run.value as T, run };
}
