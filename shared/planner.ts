// The planner's job: read the goal, the file index (never contents), the prior plan and
// the last reflection; ask the model for 1-5 subtasks; validate; dispatch one flow.
import type { Job } from 'bullmq';
import { UnrecoverableError } from 'bullmq';
import { createAgent } from './agent/create-agent.ts';
import { planContract } from './agent/output-contracts.ts';
import { budgetProblem, endOverBudget, goalUsageSink } from './budgets.ts';
import { plannerSpec, roleNames } from './config.ts';
import { PlanJobSchema, parseOrThrow, type Plan } from './contracts.ts';
import { BudgetExceededError, ValidationError } from './errors/index.ts';
import type { GoalRecord } from './goal-store.ts';
import type { Runtime } from './runtime.ts';
import { formatIndex, type FileEntry } from './vfs.ts';
import { threadIdFor } from './keys.ts';
import { saveTranscript, shortId } from './transcripts.ts';

export function plannerMessage(goal: GoalRecord, step: number, index: FileEntry[]): string {
  return [
    `Goal: ${goal.goal}`,
    `Cycle: ${step}`,
    `Current files:\n${formatIndex(index)}`,
    `Prior plan: ${goal.plan ? JSON.stringify(goal.plan) : '(none)'}`,
    `Last reflection: ${goal.reflection ? JSON.stringify({ decision: goal.reflection.decision, reason: goal.reflection.reason }) : '(none)'}`,
    ...(goal.note ? [`Note from a human: ${goal.note}`] : []),
  ].join('\n');
}

export interface PlanOutcome {
  status: 'dispatched' | 'skipped' | 'failed' | 'budget_exceeded';
  subtasks?: number;
  reason?: string;
}

export async function processPlanJob(rt: Runtime, job: Job, signal?: AbortSignal): Promise<PlanOutcome> {
  let data;
  try {
    data = parseOrThrow(PlanJobSchema, job.data, 'plan job payload');
  } catch (err) {
    throw new UnrecoverableError((err as Error).message);
  }
  const { goalId, step } = data;
  const goal = await rt.goals.get(goalId);
  if (!goal) throw new UnrecoverableError(`unknown goal id: ${goalId}`);
  const log = rt.logger.child({ goalId, step, role: 'planner', jobId: job.id });

  if (!(await rt.goals.transition(goalId, { from: ['queued', 'planning', 'reflecting', 'awaiting_human', 'running'], to: 'planning' }))) {
    return { status: 'skipped', reason: `goal is ${goal.status}` };
  }
  const over = budgetProblem(goal, { nextStep: step });
  if (over) {
    await endOverBudget(rt, goalId, over, step);
    return { status: 'budget_exceeded', reason: over };
  }

  let plan: Plan;
  if (goal.planStep === step && goal.plan) {
    // A re-delivered plan job: dispatch the plan already chosen, never ask twice.
    plan = goal.plan;
  } else {
    const index = await rt.vfs.index(goalId);
    const live = index.filter((e) => e.status !== 'evicted').map((e) => e.name);
    const agent = createAgent(plannerSpec(rt.cfg), {
      provider: rt.provider, logger: log, models: rt.cfg.models, metrics: rt.metrics,
      usageSink: goalUsageSink(rt, goal), retry: { rateLimitToQueue: false },
    });
    const threadId = threadIdFor(goalId, 'planner', shortId());
    let run;
    try {
      run = await agent.run<Plan>({
        task: plannerMessage(goal, step, index),
        contract: planContract(roleNames(rt.cfg), live),
        ctx: { role: 'planner', kind: 'planner', goalId, step, threadId, signal },
      });
    } catch (err) {
      if (err instanceof BudgetExceededError) {
        await endOverBudget(rt, goalId, err.message, step);
        return { status: 'budget_exceeded', reason: err.message };
      }
      throw err;
    }
    await saveTranscript(rt, goalId, threadId, 'planner', run.messages);
    if (!run.ok) {
      const reason = `planner output rejected: ${run.problem}`;
      log.warn({ threadId, reason }, 'planning failed');
      if (await rt.goals.transition(goalId, { to: 'failed', fields: { reason }, event: { type: 'finished', status: 'failed', step, reason } })) {
        rt.metrics.goals.inc({ status: 'failed' });
      }
      return { status: 'failed', reason };
    }
    plan = run.value!;
    await rt.goals.transition(goalId, {
      fields: { plan: JSON.stringify(plan), planStep: step },
      event: { type: 'planned', step, threadId, subtasks: plan.subtasks.map((t) => ({ role: t.role, artifact: t.expected_artifact })) },
    });
  }

  const again = await rt.goals.get(goalId);
  if (!again || again.status !== 'planning') return { status: 'skipped', reason: `goal is ${again?.status ?? 'gone'}` };
  await rt.queues.dispatchCycle(goalId, step, plan);
  await rt.goals.transition(goalId, {
    from: ['planning'], to: 'running', fields: { step, note: '' },
    event: { type: 'dispatched', step, subtasks: plan.subtasks.map((t, i) => ({ index: i, role: t.role, artifact: t.expected_artifact })) },
  });
  log.info({ subtasks: plan.subtasks.length }, 'cycle dispatched');
  return { status: 'dispatched', subtasks: plan.subtasks.length };
}

export { ValidationError };
