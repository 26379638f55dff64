// What stops a goal: its move to `cancelled` (final) and the cancel message every process
// aborts its running model calls on. Apart from the goal client so that `deepq cancel` sends
// both before it loads BullMQ (which it needs only afterwards, to remove waiting jobs).
import type { Redis } from 'ioredis';
import { UnknownGoalError } from '../shared/errors.ts';
import { isGoalId } from '../shared/goal/ids.ts';
import { GoalLifecycle } from '../shared/goal/lifecycle.ts';
import { GoalStore } from '../shared/goal/store.ts';
import { type Config, goalKeyLimits } from '../shared/runtime/config.ts';

/** True when this call moved the goal; the cancel message goes out either way. */
export async function stopGoal(redis: Redis, cfg: Config, goalId: string): Promise<boolean> {
  if (!isGoalId(goalId)) throw new UnknownGoalError(goalId);
  const limits = goalKeyLimits(cfg);
  const goals = new GoalStore(redis, cfg.prefix, limits);
  const g = await goals.mustGet(goalId);
  const lifecycle = new GoalLifecycle(redis, goals.keys, limits);
  const moved = await lifecycle.cancel(goalId, g.step);
  await lifecycle.announceHumanEnd(goalId, moved);
  return moved;
}
