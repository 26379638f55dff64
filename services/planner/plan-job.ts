// The planner's job: read the goal, the file index (never contents), the prior plan and
// the last reflection; ask the model for 1-5 subtasks; validate; dispatch one flow. A budget
// that runs out ends the goal, or (`--on-budget pause`) pauses it and parks this job.
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { runForGoal } from '../../shared/agent/run-for-goal.ts';
import { shortId, type TranscriptWrite } from '../../shared/agent/transcripts.ts';
import { type BudgetHit, budgetProblem, onBudgetOf } from '../../shared/goal/budgets.ts';
import { subtaskRefs } from '../../shared/goal/events.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { planCycle } from '../../shared/goal/lifecycle.ts';
import { isPausedForBudget, parkForBudget, parkIfPausedForBudget } from '../../shared/goal/parking.ts';
import type { Plan } from '../../shared/goal/plan.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { roleNames } from '../../shared/runtime/config.ts';
import { PlanJobSchema, parseJobData, startedOf } from '../../shared/runtime/jobs.ts';
import { REFLECT_QUEUE, reflectJobId } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { dispatchCycle } from './dispatch.ts';
import { planContract } from './plan-contract.ts';
import { planBudgetOf, plannerMessage, plannerSpec, revisable } from './prompt.ts';
import { minTokenCaps } from './token-caps.ts';

export interface PlanOutcome {
  status: 'dispatched' | 'skipped' | 'failed' | 'budget_exceeded' | 'paused';
  subtasks?: number;
  reason?: string;
}

/** A plan to dispatch, with the planner run that chose it (none for a stored plan). */
interface ChosenPlan {
  plan: Plan;
  threadId?: string;
  transcript?: TranscriptWrite;
}

interface PlanJobContext {
  rt: Runtime;
  goal: GoalRecord;
  step: number;
  threadId: string;
  log: Logger;
  signal?: AbortSignal;
  job: Job;
  token?: string;
  /** The files index as the move into planning read it (flat pairs), if it did. */
  files?: string[];
}

export async function processPlanJob(
  rt: Runtime,
  job: Job,
  signal?: AbortSignal,
  token?: string,
): Promise<PlanOutcome> {
  const { goalId, step } = parseJobData(PlanJobSchema, job.data, 'plan job payload');
  // The goal is read by the move into planning, which a goal past this cycle refuses.
  const begun = startedOf(await rt.lifecycle.planJobStart(goalId, step), goalId);
  const { goal } = begun;
  // The thread id of this run's model conversation, on every log line about the job.
  const threadId = threadIdFor(goalId, 'planner', shortId());
  const log = rt.logger.child({ goalId, step, role: 'planner', threadId, jobId: job.id });
  if (!begun.moved) return notStarted(rt, { goal, step, log, job, token });
  const over = budgetProblem(goal, { nextStep: step });
  if (over) return atBudget({ rt, goal, step, threadId, log, job, token }, over);
  // A plan stored for this cycle but not yet dispatched (by an earlier version, which stored
  // it apart from the move) is dispatched as it is, never asked for twice.
  const reuse = goal.planStep === step && goal.plan;
  const files = begun.files;
  const chosen = reuse
    ? { plan: reuse }
    : await choosePlan({ rt, goal, step, threadId, log, signal, job, token, files });
  if (!('plan' in chosen)) return chosen;
  return dispatchPlan(rt, goal, step, chosen, { log, job, token });
}

/**
 * The goal did not move into planning. Delivery is at-least-once: a process that died before
 * acking leaves this job to the stalled check, which hands it out again seconds later. By then
 * the goal may have moved on; a stale delivery changes nothing (moving the goal back to
 * `planning` would make the running reflector's decision, or the next cycle's, fail its
 * transition: a stuck goal). A cycle already dispatched gets its flow if it has none.
 */
function notStarted(
  rt: Runtime,
  c: { goal: GoalRecord; step: number; log: Logger; job: Job; token?: string },
): Promise<PlanOutcome> | PlanOutcome {
  const { goal, step, log } = c;
  if (isStale(goal, step)) {
    const fields = { status: goal.status, goalStep: goal.step, planStep: goal.planStep };
    log.info(fields, 'stale plan job: the goal has moved past this cycle');
    return { status: 'skipped', reason: `stale: the goal is ${goal.status} at cycle ${goal.step}` };
  }
  // The goal waits for a human to raise a budget: this job waits with it.
  if (isPausedForBudget(goal)) return parkForBudget(rt, c.job, c.token, goal.goalId);
  return ensureDispatched(rt, goal.goalId, step, log);
}

/** A budget ran out before planning: the goal ends, or pauses with this job parked. */
async function atBudget(c: PlanJobContext, hit: BudgetHit): Promise<PlanOutcome> {
  const { rt, goal, step } = c;
  if (onBudgetOf(goal) === 'end') {
    await rt.lifecycle.exceedBudget(goal.goalId, hit.reason, step, hit.kind);
    return { status: 'budget_exceeded', reason: hit.reason };
  }
  await rt.lifecycle.pauseForBudget(goal.goalId, hit, step);
  c.log.info({ reason: hit.reason }, 'budget reached before planning: the goal waits for a human');
  return parkForBudget(rt, c.job, c.token, goal.goalId);
}

/** A plan job for a cycle the goal has already reflected on or moved past. */
function isStale(goal: GoalRecord, step: number): boolean {
  return goal.step > step || goal.planStep > step || (goal.reflection?.step ?? 0) >= step;
}

async function choosePlan(c: PlanJobContext): Promise<ChosenPlan | PlanOutcome> {
  const { rt, goal, step } = c;
  const index = await rt.vfs.index(goal.goalId, c.files);
  const live = index.filter((e) => e.status !== 'evicted').map((e) => e.name);
  const done = index.filter((e) => e.status === 'done').map((e) => e.name);
  const inputs = index.filter((e) => e.input && e.status !== 'evicted').map((e) => e.name);
  const revise = revisable(goal, index);
  const budget = planBudgetOf(goal);
  const context = { done, revise, inputs, budget, minCaps: minTokenCaps(rt) };
  const contract = planContract(roleNames(rt.cfg), live, context);
  const res = await runForGoal<Plan>(rt, {
    spec: plannerSpec(rt.cfg),
    goal,
    task: plannerMessage(goal, step, index),
    contract,
    ctx: {
      role: 'planner',
      kind: 'planner',
      goalId: goal.goalId,
      step,
      threadId: c.threadId,
      signal: c.signal,
      subject: { goal: goal.goal, plan: goal.plan, files: live, done, inputs, revise, tokensLeft: budget?.tokensLeft },
    },
    log: c.log,
    transcriptWithResult: true,
  });
  if (res.kind === 'over_budget') return { status: 'budget_exceeded', reason: res.reason };
  if (res.kind === 'stopped') return { status: 'skipped', reason: res.reason };
  if (res.kind === 'paused') return parkForBudget(rt, c.job, c.token, goal.goalId);
  if (res.kind === 'rejected') return rejected(c, res.problem, contract.lastOverBudget());
  // The transcript lands with the move that dispatches the plan.
  return { plan: res.value, threadId: c.threadId, transcript: res.transcript };
}

/**
 * The plan broke its contract twice: the goal fails, naming the problem; unless no plan could
 * fit what is left of the token budget, which is the budget running out (end or pause), or the
 * goal paused at a budget meanwhile.
 */
async function rejected(c: PlanJobContext, problem: string, overBudget: string | null): Promise<PlanOutcome> {
  const { rt, goal, step } = c;
  if (overBudget) return atBudget(c, { kind: 'tokens', reason: `token budget too small for a plan: ${overBudget}` });
  const reason = `planner output rejected: ${problem}`;
  c.log.warn({ threadId: c.threadId, reason }, 'planning failed');
  // Only a goal still planning this cycle: a late delivery's rejected answer fails no later cycle.
  if (await rt.lifecycle.fail(goal.goalId, reason, step, ['planning'], planCycle(step))) {
    return { status: 'failed', reason };
  }
  // Refused: the deadline paused the goal while the model answered; the job waits with it and
  // plans again once resumed (else the goal moved on and there is nothing left to do).
  await parkIfPausedForBudget(rt, c.job, c.token, goal.goalId);
  return { status: 'skipped', reason: 'planner output rejected after the goal moved on' };
}

/**
 * Running first, flow second: the cycle's reflection can only start once its children
 * exist, so it always finds the goal `running`. A death between the two is repaired by the
 * re-delivery (ensureDispatched adds the missing flow). The move stores the plan: a delivery
 * it refuses (a concurrent one got there first) dispatches the stored plan instead.
 */
async function dispatchPlan(
  rt: Runtime,
  goal: GoalRecord,
  step: number,
  chosen: ChosenPlan,
  { log, job, token }: { log: Logger; job: Job; token?: string },
): Promise<PlanOutcome> {
  const { goalId } = goal;
  const { plan, threadId, transcript } = chosen;
  if (!(await rt.lifecycle.dispatch(goalId, step, plan, { threadId, before: goal.subtasksByRole, transcript }))) {
    await parkIfPausedForBudget(rt, job, token, goalId);
    return ensureDispatched(rt, goalId, step, log);
  }
  await dispatchCycle(rt.queues, rt.cfg, goalId, step, plan);
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
