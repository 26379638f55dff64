// Completed jobs stay an hour (removeOnComplete.age: a re-delivered plan cannot re-create a
// finished child), and at most `completedJobsKept` per queue. The sweep enforces that count,
// oldest first, with BullMQ's Queue.clean: as a per-job removeOnComplete.count BullMQ checked
// it on every completion (ZREVRANGE and ZREMRANGEBYRANK, 14 commands per goal). Between two
// sweeps a queue may hold more: its completion rate times the sweep interval.
import type { Runtime } from '../../shared/runtime/runtime.ts';

/** Removes each queue's oldest completed jobs beyond `keep`; returns how many went. */
export async function trimCompletedJobs(rt: Runtime, keep = rt.cfg.completedJobsKept): Promise<number> {
  let removed = 0;
  for (const name of rt.queues.allNames()) {
    const queue = rt.queues.get(name);
    const excess = (await queue.getCompletedCount()) - keep;
    if (excess > 0) removed += (await queue.clean(0, excess, 'completed')).length;
  }
  return removed;
}
