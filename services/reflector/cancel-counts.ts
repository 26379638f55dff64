// A goal cancelled, or ended as done by a human (after a review or an escalation, a stall's
// included), from the CLI or the inspector ends in a
// process without a metrics registry (the CLI), or one that does not count goals (the inspector).
// The reflector counts it when the goal's end message arrives: deepq_goals_total and
// deepq_goal_cycles, as the service that ends a goal does. Once per goal across reflector
// replicas (a claim key), only for a goal the message finds cancelled or done by a human: the
// time-budget deadline also publishes, for a goal the reflector counted. The end is also left in
// a sorted set with the message: a message no reflector heard (none was running) is counted by
// the next sweep.
import { isGoalId } from '../../shared/goal/ids.ts';
import { HUMAN_END } from '../../shared/goal/lifecycle.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

/** countCancel for the service's cancel listener (startService's onCancel): a failure is logged. */
export function countCancelLogged(rt: Runtime, goalId: string): void {
  countCancel(rt, goalId).catch((err) => rt.logger.warn({ err, goalId }, 'could not count a cancelled goal'));
}

export async function countCancel(rt: Runtime, goalId: string): Promise<boolean> {
  if (!isGoalId(goalId)) return false;
  const keys = rt.goals.keys;
  const [status, step, reason] = await rt.redis.hmget(keys.goal(goalId), 'status', 'step', 'reason');
  // The reflector counts the goals it ends done itself; a human's end says so in its reason.
  const endedByHuman = status === 'cancelled' || (status === 'done' && reason === HUMAN_END);
  let counted = false;
  if (endedByHuman) {
    const claim = await rt.redis.set(keys.cancelCounted(goalId), '1', 'EX', rt.cfg.goalKeyTtlSeconds, 'NX');
    counted = claim === 'OK';
  }
  if (counted) {
    rt.metrics.goals.inc({ status: status! });
    rt.metrics.goalCycles.observe({ status: status! }, Number(step ?? 0));
  }
  // Counted now or before (the claim), or nothing to count: the sweep need not look at it again.
  await rt.redis.zrem(keys.uncountedEnds(), goalId);
  return counted;
}

/** Ends left uncounted (no reflector listened when their message went out) taken per sweep at most. */
export const UNCOUNTED_PER_SWEEP = 1000;

/**
 * The sweep's catch-up: human ends whose message no reflector took (none was running, or its
 * subscriber was reconnecting), counted now. Those a few seconds old only: newer ones are the
 * listeners' (the claim keeps a goal from being counted twice either way).
 */
export async function countMissedEnds(rt: Runtime, now = Date.now()): Promise<number> {
  const ids = await rt.redis.zrangebyscore(
    rt.goals.keys.uncountedEnds(),
    '-inf',
    now - 5000,
    'LIMIT',
    0,
    UNCOUNTED_PER_SWEEP,
  );
  let counted = 0;
  for (const goalId of ids) {
    if (!isGoalId(goalId)) await rt.redis.zrem(rt.goals.keys.uncountedEnds(), goalId);
    else if (await countCancel(rt, goalId)) counted++;
  }
  return counted;
}
