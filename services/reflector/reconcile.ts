// The reconciler: every hand-off is "change the goal, then add its next job", and a process
// can die (or lose a reply) between the two. Periodically, goals whose status expects a job
// that no queue holds are repaired by adding that job again under its deterministic id, or
// retrying it when it finished without moving the goal. Safe at any time and concurrently:
// job ids dedupe adds, a retry of a job no longer finished is refused, and a goal that moved
// since it was read is left alone. Goals awaiting a human past their retention are ended; jobs
// still parked on a goal no longer paused at a budget (a resume that died before waking them) wake.
// Only goals not yet ended are read (the live set), however many finished ones are retained.
// A goal whose subtask waits for a tool-call approval stays `running` with its reflect parent
// waiting for children: alive, never repaired. Approvals still pending on goals that ended
// (or are gone) are released, so their paused jobs end and the pending gauge stays true.
import type { Job, Queue } from 'bullmq';
import { releaseApprovals } from '../../shared/goal/approvals.ts';
import { timeBudgetEnd } from '../../shared/goal/budgets.ts';
import { promoteParked } from '../../shared/goal/parking.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import {
  deadlineJobId,
  MAINTENANCE_QUEUE,
  PLAN_QUEUE,
  planJobId,
  REFLECT_QUEUE,
  reflectJobId,
} from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { inGoalTrace } from '../../shared/runtime/tracing.ts';

export interface ReconcileReport {
  checked: number;
  repaired: number;
  abandoned: number;
  /** Goals that ended (or are gone) whose pending approvals were released. */
  released: number;
}

const BATCH = 200;
const LIVE_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);

export async function reconcile(rt: Runtime, now = Date.now()): Promise<ReconcileReport> {
  const report: ReconcileReport = { checked: 0, repaired: 0, abandoned: 0, released: 0 };
  const ids = await liveGoalIds(rt);
  for (let i = 0; i < ids.length; i += BATCH) {
    // Two fields per goal first: most goals are finished or busy, and need no full read.
    const idle = await idleGoals(rt, ids.slice(i, i + BATCH), now, report);
    for (const goal of await Promise.all(idle.map((id) => rt.goals.get(id)))) {
      if (!goal || isTerminal(goal.status)) continue;
      if (goal.status === 'awaiting_human') report.abandoned += Number(await abandonIfExpired(rt, goal, now));
      else if ((await wakeParked(rt, goal)) || (await repair(rt, goal))) report.repaired++;
    }
  }
  report.released = await releaseStaleApprovals(rt);
  return report;
}

/**
 * Pending approvals of goals no longer live: an ended goal's calls are cancelled and its paused
 * jobs woken (they end as skipped); a gone goal's entries leave the pending set.
 */
async function releaseStaleApprovals(rt: Runtime): Promise<number> {
  const pending = await rt.approvals.pendingAll();
  let released = 0;
  for (const goalId of new Set(pending.map((p) => p.goalId))) {
    const status = await rt.redis.hget(rt.goals.keys.goal(goalId), 'status');
    if (status && !isTerminal(status)) continue;
    released++;
    if (status) {
      await releaseApprovals(rt, goalId, `the goal is ${status}`);
      continue;
    }
    const gone = pending.filter((p) => p.goalId === goalId).map((p) => `${goalId}/${p.callId}`);
    await rt.redis.zrem(rt.goals.keys.approvalsPending(), ...gone);
  }
  if (released) rt.logger.warn({ goals: released }, 'reconciler released approvals of goals no longer running');
  return released;
}

/**
 * The goals not yet ended: the live set that goal creation adds to and a goal's end leaves,
 * so the cost follows the goals in flight, not the retention. Once a day (and on the first
 * run) the set is rebuilt from the goals index, for goals created by an older deepq.
 */
async function liveGoalIds(rt: Runtime): Promise<string[]> {
  const keys = rt.goals.keys;
  if (await rt.redis.set(keys.liveGoalsRebuilt(), String(Date.now()), 'EX', 86_400, 'NX')) {
    const indexed = await rt.redis.zrange(keys.goalsIndex(), '0', '-1', 'WITHSCORES');
    for (let i = 0; i < indexed.length; i += 2 * BATCH) {
      const chunk = indexed.slice(i, i + 2 * BATCH);
      const ids = chunk.filter((_, j) => j % 2 === 0);
      const statuses = await Promise.all(ids.map((id) => rt.redis.hget(keys.goal(id), 'status')));
      const live = ids.flatMap((id, j) => (statuses[j] && !isTerminal(statuses[j]) ? [chunk[2 * j + 1]!, id] : []));
      if (live.length) await rt.redis.zadd(keys.liveGoals(), ...live);
    }
  }
  return rt.redis.zrange(keys.liveGoals(), '0', '-1');
}

/**
 * The ids of live goals not updated within the grace period; counts the live ones checked.
 * Members whose goal ended or is gone (a rebuild racing a goal's end) leave the live set.
 */
async function idleGoals(rt: Runtime, ids: string[], now: number, report: ReconcileReport): Promise<string[]> {
  const rows = await Promise.all(ids.map((id) => rt.redis.hmget(rt.goals.keys.goal(id), 'status', 'updatedAt')));
  const ended = ids.filter((_, j) => !rows[j]![0] || isTerminal(rows[j]![0]!));
  if (ended.length) await rt.redis.zrem(rt.goals.keys.liveGoals(), ...ended);
  return ids.filter((_, j) => {
    const [status, updatedAt] = rows[j]!;
    if (!status || isTerminal(status)) return false;
    report.checked++;
    return now - Number(updatedAt ?? 0) >= rt.cfg.reconcileGraceSeconds * 1000;
  });
}

async function abandonIfExpired(rt: Runtime, goal: GoalRecord, now: number): Promise<boolean> {
  const limit = rt.cfg.awaitingRetentionSeconds;
  if (now - goal.updatedAt < limit * 1000) return false;
  const reason = `no human decision within ${limit} s (awaitingRetentionSeconds): ended`;
  const ended = await rt.lifecycle.abandon(goal.goalId, reason, goal.step);
  if (!ended) return false;
  rt.logger.warn({ goalId: goal.goalId, reason }, 'reconciler ended a goal awaiting a human');
  // This move was counted here: a later `deepq cancel` of the goal (its message) must not count it again.
  await rt.redis.set(rt.goals.keys.cancelCounted(goal.goalId), '1', 'EX', rt.cfg.goalKeyTtlSeconds, 'NX');
  return true;
}

/**
 * Jobs still parked on a goal no longer paused: a resume raises the budget, then wakes them,
 * and one that died between the two left them delayed until the awaiting retention (days).
 */
async function wakeParked(rt: Runtime, goal: GoalRecord): Promise<boolean> {
  if (!(await rt.redis.exists(rt.goals.keys.parked(goal.goalId)))) return false;
  if (!(await unchanged(rt, goal))) return false;
  const woken = await promoteParked(rt, goal.goalId);
  if (!woken) return false;
  rt.metrics.reconciled.inc({ from_status: goal.status });
  rt.logger.warn({ goalId: goal.goalId, status: goal.status, woken }, 'reconciler woke jobs parked on a resumed goal');
  return true;
}

/** Adds (or retries) the job the goal's status expects, if no queue holds it alive. */
async function repair(rt: Runtime, goal: GoalRecord): Promise<boolean> {
  const { goalId, step } = goal;
  await ensureDeadline(rt, goal);
  let fixed: string | null;
  if (goal.status === 'queued' || goal.status === 'planning') {
    fixed = await ensurePlanJob(rt, goal, step + 1);
  } else {
    // running or reflecting: the cycle's reflect parent must exist. Without it, the plan job
    // of this cycle runs again: the planner finds the goal dispatched and adds the missing flow.
    const parent = await rt.queues.get(REFLECT_QUEUE).getJob(reflectJobId(goalId, step));
    fixed = parent ? await retryFinished(rt, goal, parent) : await ensurePlanJob(rt, goal, step);
  }
  if (!fixed) return false;
  rt.metrics.reconciled.inc({ from_status: goal.status });
  rt.logger.warn({ goalId, status: goal.status, step, action: fixed }, 'reconciler repaired a goal');
  return true;
}

/**
 * The plan job of `step`, which a resume adds under its own id (`-r<resumes>`) and a reflection
 * under the plain one: a goal resumed earlier plans its later cycles under the plain id, so both
 * are looked for (else the reconciler would add a second plan job beside a live one). Missing
 * both, it is added under the resume's id.
 */
async function ensurePlanJob(rt: Runtime, goal: GoalRecord, step: number): Promise<string | null> {
  const ids = [...new Set([planJobId(goal.goalId, step, goal.resumes), planJobId(goal.goalId, step)])];
  const jobs = (await Promise.all(ids.map((id) => rt.queues.get(PLAN_QUEUE).getJob(id)))).filter((j) => !!j);
  const states = await Promise.all(jobs.map((j) => j.getState()));
  if (states.some((s) => LIVE_STATES.has(s))) return null;
  if (jobs[0]) return retryFinished(rt, goal, jobs[0]);
  return ensureJob(rt, goal, PLAN_QUEUE, ids[0]!, () => rt.queues.addPlan({ goalId: goal.goalId, step }, goal.resumes));
}

/** null when the job is alive; otherwise what was done: "added <id>" or "retried <id>". */
async function ensureJob(
  rt: Runtime,
  goal: GoalRecord,
  queue: string,
  jobId: string,
  add: () => Promise<void>,
): Promise<string | null> {
  const job = await rt.queues.get(queue).getJob(jobId);
  if (job) return retryFinished(rt, goal, job);
  if (!(await unchanged(rt, goal))) return null;
  // In the goal's trace, not the reconcile run's: the job added joins the goal's tree. (A job
  // retried keeps the trace context it was added with.)
  const attrs = { 'deepq.goal.id': goal.goalId, 'deepq.status': goal.status, 'bullmq.job.id': jobId };
  await inGoalTrace(goal.goalId, 'deepq reconcile', attrs, add);
  return `added ${queue}/${jobId}`;
}

/** A job that finished while the goal still waits on it (its effect was lost) runs again. */
async function retryFinished(rt: Runtime, goal: GoalRecord, job: Job): Promise<string | null> {
  const state = await job.getState();
  if (LIVE_STATES.has(state)) return null;
  if (state !== 'completed' && state !== 'failed') return null;
  if (!(await unchanged(rt, goal))) return null;
  try {
    await job.retry(state);
  } catch {
    return null; // another reconciler (or the job's own retry) got there first
  }
  return `retried ${job.queueName}/${job.id}`;
}

/** The goal has not moved since it was read: repairing it cannot race its own progress. */
async function unchanged(rt: Runtime, goal: GoalRecord): Promise<boolean> {
  const [status, updatedAt] = await rt.redis.hmget(rt.goals.keys.goal(goal.goalId), 'status', 'updatedAt');
  return status === goal.status && Number(updatedAt) === goal.updatedAt;
}

/** A goal with a time budget always has its deadline job (enqueue may have died before adding it). */
async function ensureDeadline(rt: Runtime, goal: GoalRecord): Promise<void> {
  const end = timeBudgetEnd(goal);
  if (end === undefined) return;
  const queue: Queue = rt.queues.get(MAINTENANCE_QUEUE);
  if (await queue.getJob(deadlineJobId(goal.goalId))) return;
  const attrs = { 'deepq.goal.id': goal.goalId, 'bullmq.job.id': deadlineJobId(goal.goalId) };
  await inGoalTrace(goal.goalId, 'deepq reconcile', attrs, () => rt.queues.addDeadline(goal.goalId, end));
}
