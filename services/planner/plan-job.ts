// The planner's job: read the goal, the file index (never contents), the prior plan and
// the last reflection; ask the model for 1-5 subtasks; validate; dispatch one flow.
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { runForGoal } from '../../shared/agent/run-for-goal.ts';
import { shortId } from '../../shared/agent/transcripts.ts';
import { budgetProblem } from '../../shared/goal/budgets.ts';
import { subtaskRefs } from '../../shared/goal/events.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { Plan } from '../../shared/goal/plan.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { roleNames } from '../../shared/runtime/config.ts';
import { goalOfJob, PlanJobSchema, parseJobData } from '../../shared/runtime/jobs.ts';
import { REFLECT_QUEUE, reflectJobId } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { dispatchCycle } from './dispatch.ts';
import { planContract } from './plan-contract.ts';
import { plannerMessage, plannerSpec } from './prompt.ts';

export interface PlanOutcome {
  status: 'dispatched' | 'skipped' | 'failed' | 'budget_exceeded';
  subtasks?: number;
  reason?: string;
}

interface PlanJobContext {
  rt: Runtime;
  goal: GoalRecord;
  step: number;
  threadId: string;
  log: Logger;
  signal?: AbortSignal;
}

export async function processPlanJob(rt: Runtime, job: Job, signal?: AbortSignal): Promise<PlanOutcome> {
  const { goalId, step } = parseJobData(PlanJobSchema, job.data, 'plan job payload');
  const goal = await goalOfJob(rt.goals, goalId);
  // The thread id of this run's model conversation, on every log line about the job.
  const threadId = threadIdFor(goalId, 'planner', shortId());
  const log = rt.logger.child({ goalId, step, role: 'planner', threadId, jobId: job.id });

  // Delivery is at-least-once: a process that died before acking leaves this job to the
  // stalled check, which hands it out again seconds later. By then the goal may have moved
  // on; a stale delivery must change nothing (moving the goal back to `planning` would make
  // the running reflector's decision, or the next cycle's, fail its transition: a stuck goal).
  if (isStale(goal, step)) {
    const fields = { status: goal.status, goalStep: goal.step, planStep: goal.planStep };
    log.info(fields, 'stale plan job: the goal has moved past this cycle');
    return { status: 'skipped', reason: `stale: the goal is ${goal.status} at cycle ${goal.step}` };
  }
  if (goal.planStep === step && goal.step === step) return ensureDispatched(rt, goalId, step, log);
  if (!(await rt.lifecycle.beginPlanning(goalId))) return ensureDispatched(rt, goalId, step, log);
  const over = budgetProblem(goal, { nextStep: step });
  if (over) {
    await rt.lifecycle.exceedBudget(goalId, over, step);
    return { status: 'budget_exceeded', reason: over };
  }
  // A re-delivered plan job dispatches the plan already chosen, never asks twice.
  const reuse = goal.planStep === step && goal.plan;
  const chosen = reuse ? { plan: reuse } : await choosePlan({ rt, goal, step, threadId, log, signal });
  if (!('plan' in chosen)) return chosen;
  return dispatchPlan(rt, goalId, step, chosen.plan, log);
}

/** A plan job for a cycle the goal has already reflected on or moved past. */
function isStale(goal: GoalRecord, step: number): boolean {
  return goal.step > step || goal.planStep > step || (goal.reflection?.step ?? 0) >= step;
}

async function choosePlan(c: PlanJobContext): Promise<{ plan: Plan } | PlanOutcome> {
  const { rt, goal, step } = c;
  const index = await rt.vfs.index(goal.goalId);
  const live = index.filter((e) => e.status !== 'evicted').map((e) => e.name);
  const res = await runForGoal<Plan>(rt, {
    spec: plannerSpec(rt.cfg),
    goal,
    task: plannerMessage(goal, step, index),
    contract: planContract(roleNames(rt.cfg), live),
    ctx: {
      role: 'planner',
      kind: 'planner',
      goalId: goal.goalId,
      step,
      threadId: c.threadId,
      signal: c.signal,
      subject: { goal: goal.goal, plan: goal.plan, files: live },
    },
    log: c.log,
  });
  if (res.kind === 'over_budget') return { status: 'budget_exceeded', reason: res.reason };
  if (res.kind === 'rejected') {
    const reason = `planner output rejected: ${res.problem}`;
    c.log.warn({ threadId: c.threadId, reason }, 'planning failed');
    await rt.lifecycle.fail(goal.goalId, reason, step, ['planning']);
    return { status: 'failed', reason };
  }
  // Stored only while still planning: once a (concurrent) delivery moved the goal on, the
  // plan it dispatched is the one that stays.
  if (!(await rt.lifecycle.recordPlan(goal.goalId, step, res.value, c.threadId))) {
    return ensureDispatched(rt, goal.goalId, step, c.log);
  }
  return { plan: res.value };
}

/**
 * Running first, flow second: the cycle's reflection can only start once its children
 * exist, so it always finds the goal `running`. A death between the two is repaired by the
 * re-delivery (ensureDispatched adds the missing flow).
 */
async function dispatchPlan(rt: Runtime, goalId: string, step: number, plan: Plan, log: Logger): Promise<PlanOutcome> {
  if (!(await rt.lifecycle.dispatch(goalId, step, plan))) return ensureDispatched(rt, goalId, step, log);
  const fresh = await rt.goals.get(goalId);
  await dispatchCycle(rt.queues, rt.cfg, goalId, step, fresh?.planStep === step && fresh.plan ? fresh.plan : plan);
  log.info({ subtasks: plan.subtasks.length }, 'cycle dispatched');
  return { status: 'dispatched', subtasks: plan.subtasks.length };
}

/**
 * The goal already went `running` for this cycle (an earlier delivery, or a concurrent one,
 * got that far): add the flow if that delivery died before adding it, else nothing. Flow job
 * ids are deterministic, but re-adding a flow whose children already ran is avoided anyway.
 */
async function ensureDispatched(rt: Runtime, goalId: string, step: number, log: Logger): Promise<PlanOutcome> {
  const g = await rt.goals.get(goalId);
  const atThisCycle = g && g.step === step && g.planStep === step && g.plan;
  if (!g || isTerminal(g.status) || !atThisCycle || !['running', 'reflecting'].includes(g.status)) {
    return { status: 'skipped', reason: `goal is ${g?.status ?? 'gone'}` };
  }
  const plan = g.plan!;
  const parent = await rt.queues.get(REFLECT_QUEUE).getJob(reflectJobId(goalId, step));
  if (!parent) {
    log.warn('re-delivered plan job: the cycle had no flow yet; dispatching it');
    await dispatchCycle(rt.queues, rt.cfg, goalId, step, plan);
  }
  await rt.goals.appendEvent(goalId, { type: 'dispatched', step, redelivered: true, subtasks: subtaskRefs(plan) });
  return { status: 'dispatched', subtasks: plan.subtasks.length };
}
