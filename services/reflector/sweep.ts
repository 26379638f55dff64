// The TTL sweep (P51): finished goals older than the retention lose every key and blob;
// keys and blobs of goals that no longer exist go too; and a live goal's blobs that no entry
// points to (a write whose script failed after its blob was stored, the leftover of a write
// that died) go once they are older than `vfs.orphanBlobGraceSeconds`. Runs as a BullMQ job
// scheduler, which also caps the completed jobs each queue keeps (trim-jobs.ts) and times out
// approvals nobody decided in time (approval-timeouts.ts).
//
// Cost is linear in the keyspace: one SCAN pass finds every goal id, the statuses and the
// live goals' file indexes are read in pipelined batches, and a second SCAN pass unlinks the
// doomed goals' keys (a SCAN per goal would make the sweep quadratic). Terminal statuses are
// final (lua/goalTransition.lua never leaves one), so a goal judged expired cannot come back
// to life between the passes.
//
// Only goal ids are ever judged: an index member, the id part of a key or a blob directory
// name that is not a goal id (`<goalId>:files`, say) is ignored, never swept, so no name can
// make the sweep touch another goal's keys.

import { isGoalId } from '../../shared/goal/ids.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import { releaseIdleRateLimits } from '../../shared/runtime/queue-rate-limit.ts';
import { deadlineJobId, MAINTENANCE_QUEUE, SWEEP_SCHEDULER_ID } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { expireApprovals } from './approval-timeouts.ts';
import { trimCompletedJobs } from './trim-jobs.ts';

export interface SweepReport {
  expired: number;
  orphans: number;
  keysDeleted: number;
  /** Blob files of live goals that no entry references (and write leftovers), past the grace. */
  orphanBlobs: number;
  /** Completed BullMQ jobs removed beyond each queue's cap (trim-jobs.ts). */
  jobsTrimmed: number;
  /** Role queues whose rate limit was switched off (no 429 within the hold time). */
  rateLimitsReleased: number;
  /** Tool calls that waited for a human past their timeout, refused now (approval-timeouts.ts). */
  approvalsTimedOut: number;
}

const BATCH = 500;

export async function sweep(rt: Runtime, now = Date.now()): Promise<SweepReport> {
  const report: SweepReport = {
    expired: 0,
    orphans: 0,
    keysDeleted: 0,
    orphanBlobs: 0,
    jobsTrimmed: 0,
    rateLimitsReleased: 0,
    approvalsTimedOut: 0,
  };
  // First: a goal swept below never has a pending call (only terminal goals go).
  report.approvalsTimedOut = await expireApprovals(rt, now);
  const { ids, blobGoals } = await collectGoalIds(rt);
  const doomed = await judge(rt, ids, now, report);
  const live = ids.filter((id) => !doomed.has(id));
  const referenced = await readLiveIndexes(rt, live, new Set(blobGoals));
  report.orphanBlobs = await pruneOrphanBlobs(rt, referenced, now - rt.cfg.vfs.orphanBlobGraceSeconds * 1000);
  if (doomed.size > 0) await removeGoals(rt, doomed, report);
  report.jobsTrimmed = await trimCompletedJobs(rt);
  report.rateLimitsReleased = await releaseIdleRateLimits(rt);

  for (const [reason, n] of [
    ['retention', report.expired],
    ['orphan', report.orphans],
  ] as const)
    if (n) rt.metrics.sweptGoals.inc({ reason }, n);
  return report;
}

/** The goal's id from one of its keys, or '' when the id part is not a goal id. */
function idOfKey(rt: Runtime, key: string): string {
  const goalPrefix = `${rt.cfg.prefix}:goal:`;
  if (!key.startsWith(goalPrefix)) return '';
  const id = key.slice(goalPrefix.length).split(':')[0]!;
  return isGoalId(id) ? id : '';
}

/** Pass 1: every goal id anyone knows of: the index, the keyspace, the blob store. */
async function collectGoalIds(rt: Runtime): Promise<{ ids: string[]; blobGoals: string[] }> {
  const ids = new Set(await rt.redis.zrange(rt.goals.keys.goalsIndex(), '0', '-1'));
  for await (const batch of rt.redis.scanStream({ match: `${rt.cfg.prefix}:goal:*`, count: 1000 })) {
    for (const key of batch as string[]) ids.add(idOfKey(rt, key));
  }
  const blobGoals = (await ownsBlobStore(rt)) ? (await rt.vfs.blobs.listGoals()).filter(isGoalId) : [];
  for (const goalId of blobGoals) ids.add(goalId);
  return { ids: [...ids].filter(isGoalId), blobGoals };
}

/**
 * Whether the blob store is this deployment's. Another deployment's goals (the same blob dir
 * and prefix, another Redis: a demo beside `deepq up`) have no hash here, and would be swept
 * as orphans with their spilled artifacts; a store claimed by another is left alone.
 */
async function ownsBlobStore(rt: Runtime): Promise<boolean> {
  const { owner, deployment } = await rt.vfs.blobStoreOwner();
  if (owner === deployment) return true;
  rt.logger.warn(
    { blobDir: rt.cfg.vfs.blobDir, prefix: rt.cfg.prefix, owner, deployment },
    'the blob store belongs to another deployment (the same DEEPQ_BLOB_DIR and DEEPQ_PREFIX, another Redis): ' +
      'its goal folders are not swept; give each deployment its own DEEPQ_BLOB_DIR (if this Redis lost its data, ' +
      "remove the store's .owner file to claim it)",
  );
  return false;
}

/** Which goals go: finished before the cutoff, or with no goal hash at all. */
async function judge(rt: Runtime, ids: string[], now: number, report: SweepReport): Promise<Set<string>> {
  const cutoff = now - rt.cfg.retentionSeconds * 1000;
  const doomed = new Set<string>();
  for (let i = 0; i < ids.length; i += BATCH) {
    const chunk = ids.slice(i, i + BATCH);
    const p = rt.redis.pipeline();
    for (const goalId of chunk) p.hmget(rt.goals.keys.goal(goalId), 'status', 'finishedAt');
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
  return doomed;
}

/**
 * Reads the file index of every goal that stays, once: sets deepq_vfs_bytes from the live
 * entries (tombstones are 0) and returns, for the goals that have a blob directory, the blob
 * refs their entries point to.
 */
async function readLiveIndexes(
  rt: Runtime,
  goalIds: string[],
  withBlobs: ReadonlySet<string>,
): Promise<Map<string, Set<string>>> {
  let inline = 0;
  let spilled = 0;
  const refs = new Map<string, Set<string>>();
  for (let i = 0; i < goalIds.length; i += BATCH) {
    const chunk = goalIds.slice(i, i + BATCH);
    const p = rt.redis.pipeline();
    // Each goal's index, then its history: a revised artifact's old versions keep their blobs.
    for (const goalId of chunk) p.hvals(rt.goals.keys.files(goalId)).hvals(rt.goals.keys.history(goalId));
    const res = (await p.exec()) ?? [];
    chunk.forEach((goalId, j) => {
      const [err, values] = res[2 * j] ?? [null, []];
      const [histErr, history] = res[2 * j + 1] ?? [null, []];
      if (err || histErr) throw err ?? histErr;
      const kept = withBlobs.has(goalId) ? new Set<string>() : undefined;
      if (kept) refs.set(goalId, kept);
      for (const raw of history as string[]) {
        const ref = (JSON.parse(raw) as { blobRef?: string }).blobRef;
        if (ref) kept?.add(ref);
      }
      for (const raw of values as string[]) {
        const e = JSON.parse(raw) as { status?: string; bytes?: number; blobRef?: string };
        // A tombstone keeps no pointer, but a ref is a ref: never remove what an entry names.
        if (e.blobRef) kept?.add(e.blobRef);
        if (e.status === 'evicted') continue;
        if (e.blobRef) spilled += e.bytes ?? 0;
        else inline += e.bytes ?? 0;
      }
    });
  }
  rt.metrics.vfsBytes.set({ storage: 'inline' }, inline);
  rt.metrics.vfsBytes.set({ storage: 'spilled' }, spilled);
  return refs;
}

/**
 * The live goals' blobs that no entry references, and write leftovers, older than the grace.
 * The indexes were read before the directories are listed, and a write stores its blob before
 * its entry: a blob that is unreferenced and older than the grace was never claimed in time.
 */
async function pruneOrphanBlobs(rt: Runtime, referenced: Map<string, Set<string>>, olderThan: number): Promise<number> {
  let removed = 0;
  for (const [goalId, keep] of referenced) removed += await rt.vfs.blobs.pruneGoal(goalId, keep, olderThan);
  return removed;
}

/**
 * Pass 2: unlink the doomed goals' keys (transcripts included), then their index entries and
 * blobs. UNLINK frees big hashes off the main thread. A key is unlinked only when its id part
 * is a doomed goal id.
 */
async function removeGoals(rt: Runtime, doomed: Set<string>, report: SweepReport): Promise<void> {
  const keys = rt.goals.keys;
  const unlink = async (batch: string[]) => {
    if (batch.length) report.keysDeleted += await rt.redis.unlink(...batch);
  };
  const fixed = [...doomed].flatMap((goalId) => keys.goalKeys(goalId));
  for (let i = 0; i < fixed.length; i += BATCH) await unlink(fixed.slice(i, i + BATCH));
  const fixedSet = new Set(fixed);
  for await (const batch of rt.redis.scanStream({ match: `${rt.cfg.prefix}:goal:*`, count: 1000 })) {
    await unlink((batch as string[]).filter((key) => doomed.has(idOfKey(rt, key)) && !fixedSet.has(key)));
  }
  const gone = [...doomed];
  for (let i = 0; i < gone.length; i += BATCH) {
    const batch = gone.slice(i, i + BATCH);
    await Promise.all([rt.redis.zrem(keys.goalsIndex(), ...batch), rt.redis.zrem(keys.liveGoals(), ...batch)]);
  }
  for (const goalId of gone) await rt.vfs.blobs.deleteGoal(goalId);
  await removeDeadlines(rt, gone);
}

/**
 * A goal with a time budget that ended before it has a deadline job still delayed, up to the
 * budget (ten years at most): it goes with the goal. One removal per goal, a batch at a time.
 */
async function removeDeadlines(rt: Runtime, goalIds: string[]): Promise<void> {
  const queue = rt.queues.get(MAINTENANCE_QUEUE);
  for (let i = 0; i < goalIds.length; i += BATCH) {
    const batch = goalIds.slice(i, i + BATCH);
    // A deadline firing right now is locked: it finds the goal gone and ends by itself.
    await Promise.all(batch.map((id) => queue.remove(deadlineJobId(id)).catch(() => 0)));
  }
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
