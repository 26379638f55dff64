// The TTL sweep (P51): finished goals older than the retention lose every key and blob;
// keys and blobs of goals that no longer exist go too. Runs as a BullMQ job scheduler.
//
// Cost is linear in the keyspace: one SCAN pass finds every goal id, the statuses are read in
// pipelined batches, and a second SCAN pass unlinks the doomed goals' keys (a SCAN per goal
// would make the sweep quadratic). Terminal statuses are final (lua/goalTransition.lua never
// leaves one), so a goal judged expired cannot come back to life between the passes.

import { isTerminal } from '../../shared/goal/status.ts';
import { MAINTENANCE_QUEUE, SWEEP_SCHEDULER_ID } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

export interface SweepReport {
  expired: number;
  orphans: number;
  keysDeleted: number;
}

const BATCH = 500;

export async function sweep(rt: Runtime, now = Date.now()): Promise<SweepReport> {
  const report: SweepReport = { expired: 0, orphans: 0, keysDeleted: 0 };
  const keys = rt.goals.keys;
  const cutoff = now - rt.cfg.retentionSeconds * 1000;
  const goalPrefix = `${rt.cfg.prefix}:goal:`;
  const idOf = (key: string) => key.slice(goalPrefix.length).split(':')[0]!;

  // Pass 1: every goal id anyone knows of: the index, the keyspace, the blob store.
  const ids = new Set(await rt.redis.zrange(keys.goalsIndex(), '0', '-1'));
  for await (const batch of rt.redis.scanStream({ match: `${goalPrefix}*`, count: 1000 })) {
    for (const key of batch as string[]) ids.add(idOf(key));
  }
  for (const goalId of await rt.vfs.blobs.listGoals()) ids.add(goalId);
  ids.delete('');

  // Which of them go: finished before the cutoff, or with no goal hash at all.
  const doomed = new Set<string>();
  const all = [...ids];
  for (let i = 0; i < all.length; i += BATCH) {
    const chunk = all.slice(i, i + BATCH);
    const p = rt.redis.pipeline();
    for (const goalId of chunk) p.hmget(keys.goal(goalId), 'status', 'finishedAt');
    const res = (await p.exec()) ?? [];
    chunk.forEach((goalId, j) => {
      const [err, value] = res[j] ?? [null, null];
      if (err) throw err;
      const [status, finishedAt] = (value as (string | null)[] | null) ?? [null, null];
      if (!status) {
        report.orphans++;
        doomed.add(goalId);
      } else if (isTerminal(status) && Number(finishedAt ?? 0) <= cutoff) {
        report.expired++;
        doomed.add(goalId);
      }
    });
  }
  await measureLiveBytes(
    rt,
    all.filter((id) => !doomed.has(id)),
  );
  if (doomed.size === 0) return report;

  // Pass 2: unlink the doomed goals' keys (transcripts included), then their index entries
  // and blobs. UNLINK frees big hashes off the main thread.
  const unlink = async (batch: string[]) => {
    if (batch.length) report.keysDeleted += await rt.redis.unlink(...batch);
  };
  const fixed = [...doomed].flatMap((goalId) => keys.goalKeys(goalId));
  for (let i = 0; i < fixed.length; i += BATCH) await unlink(fixed.slice(i, i + BATCH));
  const fixedSet = new Set(fixed);
  for await (const batch of rt.redis.scanStream({ match: `${goalPrefix}*`, count: 1000 })) {
    await unlink((batch as string[]).filter((key) => doomed.has(idOf(key)) && !fixedSet.has(key)));
  }
  const gone = [...doomed];
  for (let i = 0; i < gone.length; i += BATCH) await rt.redis.zrem(keys.goalsIndex(), ...gone.slice(i, i + BATCH));
  for (const goalId of gone) await rt.vfs.blobs.deleteGoal(goalId);

  for (const [reason, n] of [
    ['retention', report.expired],
    ['orphan', report.orphans],
  ] as const)
    if (n) rt.metrics.sweptGoals.inc({ reason }, n);
  return report;
}

/** Sets deepq_vfs_bytes from the live entries of the goals that stay (tombstones are 0). */
async function measureLiveBytes(rt: Runtime, goalIds: string[]): Promise<void> {
  let inline = 0;
  let spilled = 0;
  for (let i = 0; i < goalIds.length; i += BATCH) {
    const p = rt.redis.pipeline();
    for (const goalId of goalIds.slice(i, i + BATCH)) p.hvals(rt.goals.keys.files(goalId));
    for (const [err, values] of (await p.exec()) ?? []) {
      if (err) throw err;
      for (const raw of values as string[]) {
        const e = JSON.parse(raw) as { status?: string; bytes?: number; blobRef?: string };
        if (e.status === 'evicted') continue;
        if (e.blobRef) spilled += e.bytes ?? 0;
        else inline += e.bytes ?? 0;
      }
    }
  }
  rt.metrics.vfsBytes.set({ storage: 'inline' }, inline);
  rt.metrics.vfsBytes.set({ storage: 'spilled' }, spilled);
}

/** The reflector hosts the schedule; upsert is idempotent across replicas. */
export async function scheduleSweep(rt: Runtime): Promise<void> {
  await rt.queues
    .get(MAINTENANCE_QUEUE)
    .upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every: rt.cfg.sweepIntervalSeconds * 1000 },
      { name: 'sweep', data: {}, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
    );
}
