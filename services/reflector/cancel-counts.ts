// A goal cancelled, or ended as done by a human (after a review or an escalation, a stall's
// included), from the CLI or the inspector ends in a
// process without a metrics registry (the CLI), or one that does not count goals (the inspector).
// The reflector counts it when the goal's end message arrives: deepq_goals_total and
// deepq_goal_cycles, as the service that ends a goal does. Once per goal across reflector
// replicas (a claim key), only for a goal the message finds cancelled or done by a human: the
// time-budget deadline also publishes, for a goal the reflector counted.
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
  if (!endedByHuman) return false;
  const claim = await rt.redis.set(keys.cancelCounted(goalId), '1', 'EX', rt.cfg.goalKeyTtlSeconds, 'NX');
  if (claim !== 'OK') return false;
  rt.metrics.goals.inc({ status });
  rt.metrics.goalCycles.observe({ status }, Number(step ?? 0));
  return true;
}
