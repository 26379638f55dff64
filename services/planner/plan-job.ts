// The planner's job: read the goal, the file index (never contents), the prior plan and
// the last reflection; ask the model for 1-5 subtasks; validate; dispatch one flow.
import type { Job } from 'bullmq';
import { UnrecoverableError } from 'bullmq';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { planContract } from './plan-contract.ts';
import { budgetProblem, endOverBudget, goalUsageSink } from '../../shared/goal/budgets.ts';
import { plannerSpec, roleNames } from '../../shared/runtime/config.ts';
import { PlanJobSchema } from '../../shared/runtime/jobs.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import { parseOrThrow } from '../../shared/zod.ts';
import { type Plan } from '../../shared/goal/plan.ts';
import { REFLECT_QUEUE, reflectJobId } from '../../shared/runtime/queues.ts';
import { BudgetExceededError } from '../../shared/errors.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { formatIndex, type FileEntry } from '../../shared/vfs/vfs.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { saveTranscript, shortId } from '../../shared/agent/transcripts.ts';

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
  // The thread id of this run's model conversation, on every log line about the job.
  const threadId = threadIdFor(goalId, 'planner', shortId());
  const log = rt.logger.child({ goalId, step, role: 'planner', threadId, jobId: job.id });

  // Delivery is at-least-once: a process that died before acking leaves this job to the
  // stalled check, which hands it out again seconds later. By then the goal may have moved
  // on; a stale delivery must change nothing (moving the goal back to `planning` would make
  // the running reflector's decision, or the next cycle's, fail its transition: a stuck goal).
  if (isStale(goal, step)) {
    log.info({ status: goal.status, goalStep: goal.step, planStep: goal.planStep }, 'stale plan job: the goal has moved past this cycle');
    return { status: 'skipped', reason: `stale: the goal is ${goal.status} at cycle ${goal.step}` };
  }
  if (goal.planStep === step && goal.step === step) return ensureDispatched(rt, goalId, step, log);

  if (!(await rt.goals.transition(goalId, { from: ['queued', 'planning'], to: 'planning' }))) {
    return ensureDispatched(rt, goalId, step, log);
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
      usageSink: goalUsageSink(rt, goal), retry: { ...rt.cfg.modelRetry, rateLimitToQueue: false },
    });
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
      if (await rt.goals.transition(goalId, { from: ['planning'], to: 'failed', fields: { reason }, event: { type: 'finished', status: 'failed', step, reason } })) {
        rt.metrics.goals.inc({ status: 'failed' });
      }
      return { status: 'failed', reason };
    }
    plan = run.value!;
    // Stored only while still planning: once a (concurrent) delivery moved the goal on, the
    // plan it dispatched is the one that stays.
    const stored = await rt.goals.transition(goalId, {
      from: ['planning'],
      fields: { plan: JSON.stringify(plan), planStep: step },
      event: { type: 'planned', step, threadId, subtasks: plan.subtasks.map((t) => ({ role: t.role, artifact: t.expected_artifact })) },
    });
    if (!stored) return ensureDispatched(rt, goalId, step, log);
  }

  // Running first, flow second: the cycle's reflection can only start once its children
  // exist, so it always finds the goal `running`. A death between the two is repaired by the
  // re-delivery (ensureDispatched adds the missing flow).
  const moved = await rt.goals.transition(goalId, {
    from: ['planning'], to: 'running', fields: { step, note: '' },
    event: { type: 'dispatched', step, subtasks: plan.subtasks.map((t, i) => ({ index: i, role: t.role, artifact: t.expected_artifact })) },
  });
  if (!moved) return ensureDispatched(rt, goalId, step, log);
  const fresh = await rt.goals.get(goalId);
  await rt.queues.dispatchCycle(goalId, step, fresh?.planStep === step && fresh.plan ? fresh.plan : plan);
  log.info({ subtasks: plan.subtasks.length }, 'cycle dispatched');
  return { status: 'dispatched', subtasks: plan.subtasks.length };
}

/** A plan job for a cycle the goal has already reflected on or moved past. */
function isStale(goal: GoalRecord, step: number): boolean {
  return goal.step > step || goal.planStep > step || (goal.reflection?.step ?? 0) >= step;
}

/**
 * The goal already went `running` for this cycle (an earlier delivery, or a concurrent one,
 * got that far): add the flow if that delivery died before adding it, else nothing. Flow job
 * ids are deterministic, but re-adding a flow whose children already ran is avoided anyway.
 */
async function ensureDispatched(rt: Runtime, goalId: string, step: number, log: Runtime['logger']): Promise<PlanOutcome> {
  const g = await rt.goals.get(goalId);
  if (!g || isTerminal(g.status) || g.step !== step || g.planStep !== step || !g.plan || !['running', 'reflecting'].includes(g.status)) {
    return { status: 'skipped', reason: `goal is ${g?.status ?? 'gone'}` };
  }
  const parent = await rt.queues.get(REFLECT_QUEUE).getJob(reflectJobId(goalId, step));
  if (!parent) {
    log.warn('re-delivered plan job: the cycle had no flow yet; dispatching it');
    await rt.queues.dispatchCycle(goalId, step, g.plan);
  }
  await rt.goals.appendEvent(goalId, { type: 'dispatched', step, redelivered: true, subtasks: g.plan.subtasks.map((t, i) => ({ index: i, role: t.role, artifact: t.expected_artifact })) });
  return { status: 'dispatched', subtasks: g.plan.subtasks.length };
}

