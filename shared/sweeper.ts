// The TTL sweep (P51): finished goals older than the retention lose every key and blob;
// keys and blobs of goals that no longer exist go too. Runs as a BullMQ job scheduler.
import type { Runtime } from './runtime.ts';
import { isTerminal } from './contracts.ts';
import { MAINTENANCE_QUEUE, SWEEP_SCHEDULER_ID } from './queues.ts';

export interface SweepReport {
  expired: number;
  orphans: number;
  keysDeleted: number;
}

async function deleteGoal(rt: Runtime, goalId: string): Promise<number> {
  const keys = new Set(rt.goals.keys.goalKeys(goalId));
  const stream = rt.redis.scanStream({ match: rt.goals.keys.goalPattern(goalId), count: 500 });
  for await (const batch of stream) for (const k of batch as string[]) keys.add(k);
  const n = await rt.redis.del(...keys);
  await rt.redis.zrem(rt.goals.keys.goalsIndex(), goalId);
  await rt.vfs.blobs.deleteGoal(goalId);
  return n;
}

export async function sweep(rt: Runtime, now = Date.now()): Promise<SweepReport> {
  const report: SweepReport = { expired: 0, orphans: 0, keysDeleted: 0 };
  const cutoff = now - rt.cfg.retentionSeconds * 1000;
  const ids = await rt.redis.zrange(rt.goals.keys.goalsIndex(), '0', '-1');
  for (const goalId of ids) {
    const [status, finishedAt] = await rt.redis.hmget(rt.goals.keys.goal(goalId), 'status', 'finishedAt');
    if (!status) {
      report.orphans++;
      report.keysDeleted += await deleteGoal(rt, goalId);
    } else if (isTerminal(status) && Number(finishedAt ?? 0) <= cutoff) {
      report.expired++;
      report.keysDeleted += await deleteGoal(rt, goalId);
    }
  }
  // Keys whose goal hash is gone (expired by the backstop TTL, or a crash mid-delete).
  const prefix = `${rt.cfg.prefix}:goal:`;
  const orphanIds = new Set<string>();
  for await (const batch of rt.redis.scanStream({ match: `${prefix}*:*`, count: 1000 })) {
    for (const key of batch as string[]) orphanIds.add(key.slice(prefix.length).split(':')[0]!);
  }
  for (const goalId of await rt.vfs.blobs.listGoals()) orphanIds.add(goalId);
  for (const goalId of orphanIds) {
    if (await rt.redis.exists(rt.goals.keys.goal(goalId))) continue;
    report.orphans++;
    report.keysDeleted += await deleteGoal(rt, goalId);
  }
  for (const [reason, n] of [['retention', report.expired], ['orphan', report.orphans]] as const) if (n) rt.metrics.sweptGoals.inc({ reason }, n);
  return report;
}

/** The reflector hosts the schedule; upsert is idempotent across replicas. */
export async function scheduleSweep(rt: Runtime): Promise<void> {
  await rt.queues.get(MAINTENANCE_QUEUE).upsertJobScheduler(
    SWEEP_SCHEDULER_ID,
    { every: rt.cfg.sweepIntervalSeconds * 1000 },
    { name: 'sweep', data: {}, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
  );
}
