// The reflector's job: runs once a cycle's children have all finished (failed ones too),
// evicts stale artifacts, records the cycle's progress, then decides continue / replan / end /
// escalate. After `stall.cycles` cycles without progress (shared/goal/progress.ts), or at max
// depth, it escalates (a stall: or fails, by config) without asking the model.
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { runForGoal } from '../../shared/agent/run-for-goal.ts';
import { shortId } from '../../shared/agent/transcripts.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { atCycle, type Decided } from '../../shared/goal/lifecycle.ts';
import { isPausedForBudget, parkForBudget, parkIfPausedForBudget } from '../../shared/goal/parking.ts';
import type { Reflection } from '../../shared/goal/plan.ts';
import { progressEntry, recordProgress, stallReason } from '../../shared/goal/progress.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { parseJobData, ReflectJobSchema, startedOf } from '../../shared/runtime/jobs.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import type { FileEntry } from '../../shared/vfs/vfs.ts';
import { reflectionContract } from './decision-contract.ts';
import { collectOutcomes, type SubtaskOutcome } from './outcomes.ts';
import { reflectorMessage, reflectorSpec } from './prompt.ts';

export interface ReflectResult {
  decision?: string;
  skipped?: string;
}

export async function processReflectJob(
  rt: Runtime,
  job: Job,
  signal?: AbortSignal,
  token?: string,
): Promise<ReflectResult> {
  const { goalId, step } = parseJobData(ReflectJobSchema, job.data, 'reflect job payload');
  // The goal is read by the move into reflecting, which a goal not at this cycle refuses.
  const begun = startedOf(await rt.lifecycle.reflectJobStart(goalId, step), goalId);
  const { goal } = begun;
  if (!begun.moved) return notStarted(rt, goal, step, job, token);
  const threadId = threadIdFor(goalId, 'reflector', shortId());
  const log = rt.logger.child({ goalId, step, role: 'reflector', threadId, jobId: job.id });

  const outcomes = await collectOutcomes(rt, job, goal);
  const evicted = await rt.vfs.evict(goalId, step, begun.files);
  if (evicted.length) log.info({ evicted: evicted.length }, 'evicted stale artifacts');
  // The index the move read is the one to reflect on, unless eviction may have changed it, or
  // a failed revision's done version was put back since (outcomes.ts).
  const settled = outcomes.some((o) => o.status === 'failed');
  const files = rt.vfs.evictionIsIdle(step, begun.files) && !settled ? begun.files : undefined;

  const decided = await decide(rt, { goal, step, outcomes, threadId, log, signal, job, token, files });
  if (!('reflection' in decided)) return decided;
  // Counted once applied: a refused move (the goal paused at its time budget while the call ran)
  // parks the job, which decides again after the resume.
  const applied = await applyDecision(rt, goal, decided);
  if (applied) rt.metrics.decisions.inc({ decision: decided.reflection.decision });
  else await parkIfPausedForBudget(rt, job, token, goalId);
  // Refused and not parked: the goal moved on while the call ran (a stale delivery, or an end).
  log.info({ decision: decided.reflection.decision, applied }, applied ? 'reflected' : 'reflected; the goal moved on');
  return { decision: decided.reflection.decision };
}

/** The goal did not move into reflecting: it ended, waits, moved on, or was decided already. */
async function notStarted(
  rt: Runtime,
  goal: GoalRecord,
  step: number,
  job: Job,
  token?: string,
): Promise<ReflectResult> {
  const { goalId } = goal;
  if (isTerminal(goal.status)) return { skipped: goal.status };
  // The goal waits for a human to raise a budget: the reflection waits with it.
  if (isPausedForBudget(goal)) return parkForBudget(rt, job, token, goalId);
  if (isStale(goal, step)) {
    const fields = { goalId, step, jobId: job.id, status: goal.status, goalStep: goal.step };
    rt.logger.info(fields, 'stale reflect job: the goal is not at this cycle');
    return { skipped: `stale: the goal is ${goal.status} at cycle ${goal.step}` };
  }
  if (goal.status === 'queued' && goal.reflection?.step === step && !goal.review && requeued(goal.reflection)) {
    // Re-delivered after the decision was stored: finish the hand-off (job ids dedupe it).
    await rt.queues.addPlan({ goalId, step: step + 1 });
    return { decision: goal.reflection.decision };
  }
  return { skipped: goal.status };
}

/**
 * Whether the stored decision queued the goal itself. After an escalation the goal is queued
 * by a human's resume, which adds its own plan job: a second one would plan the cycle twice.
 */
function requeued(reflection: Pick<Reflection, 'decision'>): boolean {
  return reflection.decision === 'continue' || reflection.decision === 'replan';
}

/**
 * A stale delivery (its first process died before acking; the stalled check handed it out
 * again) for a cycle the goal has moved past, or a job for a cycle never dispatched: moving
 * the goal back to `reflecting` would strand the current cycle.
 */
function isStale(goal: GoalRecord, step: number): boolean {
  return goal.step !== step || goal.planStep > step || (goal.reflection?.step ?? 0) > step;
}

interface DecideInput {
  goal: GoalRecord;
  step: number;
  outcomes: SubtaskOutcome[];
  threadId: string;
  log: Logger;
  signal?: AbortSignal;
  job: Job;
  token?: string;
  /** The files index (flat pairs) read with the move into reflecting, if still current. */
  files?: string[];
}

/**
 * The decision: the one already stored (a re-delivery), the stall detector's, a forced
 * escalation at max depth, or the model's; with the cycle's outcomes and progress record.
 */
async function decide(rt: Runtime, d: DecideInput): Promise<Decided | ReflectResult> {
  const { goal, step } = d;
  const outcomes = d.outcomes.map((o) => ({ index: o.index, status: o.status }));
  if (goal.reflection?.step === step) return { step, reflection: goal.reflection, outcomes };
  const details = d.outcomes.map(({ bytes: _bytes, ...o }) => o);
  // Replaces any entry for this step: a re-delivered reflection records the cycle once.
  const progress = recordProgress(goal.progress, progressEntry(step, goal.plan, details));
  // Cycles since the goal began or a human last resumed it: each resume grants maxDepth more.
  const depth = goal.depth + 1;
  const base = { step, outcomes, details, progress, depth };
  const { cycles, action } = rt.cfg.stall;
  const stalled = stallReason(progress, cycles);
  if (stalled) {
    d.log.warn({ reason: stalled, action }, 'stalled: no progress; not asking the model again');
    return {
      ...base,
      // Failing ends the loop; escalating hands it to a human: the record says which.
      reflection: { decision: action === 'fail' ? 'end' : 'escalate', reason: stalled },
      stalled: { reason: stalled, cycles, action },
    };
  }
  const decided = await askModel(rt, d, base);
  return depth >= rt.cfg.maxDepth ? atMaxDepth(rt.cfg.maxDepth, decided) : decided;
}

/**
 * The cycle that reaches the max depth still ends a finished goal (the model's `end`), but no
 * cycle past it starts without a human: a `continue` or `replan` becomes an escalation.
 */
export function atMaxDepth(maxDepth: number, decided: Decided | ReflectResult): Decided | ReflectResult {
  if (!('reflection' in decided) || !['continue', 'replan'].includes(decided.reflection.decision)) return decided;
  const { step, depth = step } = decided;
  const since = step > depth ? ' since the last resume' : '';
  const wanted = `${decided.reflection.decision}: ${decided.reflection.reason}`.slice(0, 1500);
  const reached = `max depth ${maxDepth} reached after ${depth} cycle(s)${since}`;
  const reason = `${reached}: a human must decide (the reflector would ${wanted})`;
  // The rest of the decision stays: its `revise` list is what the human's resume re-plans from
  // (dropped, the planner was refused the revision of a done artifact, and the goal failed).
  return { ...decided, reflection: { ...decided.reflection, decision: 'escalate', reason } };
}

async function askModel(
  rt: Runtime,
  d: DecideInput,
  base: Omit<Decided, 'reflection'>,
): Promise<Decided | ReflectResult> {
  const { goal, step } = d;
  const index = await rt.vfs.index(goal.goalId, d.files);
  const files = index.filter((e) => e.status !== 'evicted').map((e) => e.name);
  const res = await runForGoal<Reflection>(rt, {
    spec: reflectorSpec(rt.cfg),
    goal,
    task: reflectorMessage(goal, step, d.outcomes, index),
    contract: reflectionContract,
    ctx: {
      role: 'reflector',
      kind: 'reflector',
      goalId: goal.goalId,
      step,
      threadId: d.threadId,
      signal: d.signal,
      subject: { goal: goal.goal, plan: goal.plan, files },
    },
    log: d.log,
    transcriptWithResult: true,
  });
  if (res.kind === 'over_budget') return { skipped: 'budget_exceeded' };
  if (res.kind === 'stopped') return { skipped: res.reason };
  if (res.kind === 'paused') return parkForBudget(rt, d.job, d.token, goal.goalId);
  if (res.kind === 'rejected') {
    const rejected = `reflector output rejected: ${res.problem}`;
    // Only a goal still reflecting this cycle: a late delivery's rejected answer fails no later one.
    if (await rt.lifecycle.fail(goal.goalId, rejected, step, ['reflecting'], atCycle(step))) {
      return { decision: 'failed' };
    }
    // Refused: the deadline paused the goal while the model answered (the job waits with it and
    // reflects again once resumed), or the goal moved on.
    await parkIfPausedForBudget(rt, d.job, d.token, goal.goalId);
    return { skipped: 'reflector output rejected after the goal moved on' };
  }
  // The transcript lands with the move the decision makes.
  const reflection = endWithoutWork(res.value, d.outcomes, index);
  return { ...base, reflection, threadId: d.threadId, transcript: res.transcript };
}

/**
 * An `end` when nothing was made (no subtask of the cycle finished, no artifact is done) would
 * report a goal `done` with no result: a human decides instead (`resume --end` still ends it).
 * A subtask stopped at its token cap having written nothing made nothing, and the user's own
 * input files are not a result: either let a goal end `done` with nothing of its own.
 */
export function endWithoutWork(
  reflection: Reflection,
  outcomes: Pick<SubtaskOutcome, 'status' | 'bytes'>[],
  index: Pick<FileEntry, 'status' | 'input'>[],
): Reflection {
  if (reflection.decision !== 'end') return reflection;
  const finished = outcomes.some((o) => o.status === 'done' || (o.status === 'partial' && (o.bytes ?? 0) > 0));
  if (finished || index.some((e) => e.status === 'done' && !e.input)) return reflection;
  const wanted = reflection.reason.slice(0, 1500);
  const nothing = 'no subtask finished and no artifact is done';
  const reason = `${nothing}: a human must decide (the reflector would end: ${wanted})`;
  return { ...reflection, decision: 'escalate', reason };
}

/** Applies the decision with its move; false when the move was refused. */
async function applyDecision(rt: Runtime, goal: GoalRecord, d: Decided): Promise<boolean> {
  const { decision } = d.reflection;
  if (d.stalled) {
    const moved =
      d.stalled.action === 'fail'
        ? await rt.lifecycle.failStalled(goal.goalId, d)
        : await rt.lifecycle.awaitHuman(goal.goalId, d, 'escalation');
    if (moved) rt.metrics.stalls.inc({ action: d.stalled.action });
    return moved;
  }
  // The seed's interrupt after reflection: under review a human confirms every decision.
  if (decision !== 'escalate' && goal.review) return rt.lifecycle.awaitHuman(goal.goalId, d, 'review');
  if (decision === 'end') return rt.lifecycle.complete(goal.goalId, d);
  if (decision === 'escalate') return rt.lifecycle.awaitHuman(goal.goalId, d, 'escalation');
  if (!(await rt.lifecycle.requeue(goal.goalId, d))) return false;
  await rt.queues.addPlan({ goalId: goal.goalId, step: d.step + 1 });
  return true;
}
