// The TTL sweep (P51): finished goals older than the retention lose every key and blob;
// keys and blobs of goals that no longer exist go too; and a live goal's blobs that no entry
// points to (a write whose script failed after its blob was stored, the leftover of a write
// that died) go once they are older than `vfs.orphanBlobGraceSeconds`. Runs as a BullMQ job
// scheduler, which also caps the completed jobs each queue keeps (trim-jobs.ts) and times out
// approvals nobody decided in time (approval-timeouts.ts).
//
// Its work per run is bounded, however many goals are kept: the goals past their retention are
// read off the ended-goals index (goalTransition.lua adds a goal as it ends), at most
// EXPIRED_PER_SWEEP a run. Everything else (keys whose goal is gone, goals that ended before the
// index existed, orphan blobs, the artifact byte gauge) comes from a census that walks the goal
// namespace, the goals index and the blob store a slice per run (CENSUS_PER_SWEEP keys), its
// cursors kept in Redis: a full pass takes one run on a small deployment and several on a large
// one. (Scanning everything each run cost about 1.6 s at 30,000 kept goals, every minute.)
// Terminal statuses are final (lua/goalTransition.lua never leaves one), so a goal judged
// expired cannot come back to life before its keys go.
//
// Only goal ids are ever judged: an index member, the id part of a key or a blob directory
// name that is not a goal id (`<goalId>:files`, say) is ignored, never swept, so no name can
// make the sweep touch another goal's keys.

import type { ChainableCommander } from 'ioredis';
import { KEYED_GOAL_ID_LENGTH } from '../../shared/goal/ids.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import { releaseIdleRateLimits } from '../../shared/runtime/queue-rate-limit.ts';
import { deadlineJobId, MAINTENANCE_QUEUE, SWEEP_SCHEDULER_ID } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { expireApprovals } from './approval-timeouts.ts';
import { countMissedEnds } from './cancel-counts.ts';
import { type Census, idOfKey, saveCensusBytes, takeCensus } from './sweep-census.ts';
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
  /** Goals a human ended that no reflector had counted (its message missed), counted now. */
  endsCounted: number;
  /** Whether this run's census slice ended a pass over the whole goal namespace. */
  censusPassEnded: boolean;
}

const BATCH = 500;
/** Goals past their retention removed per run at most (the next run goes on): 333 a second. */
export const EXPIRED_PER_SWEEP = 20_000;
/** Keys of the goal namespace (SCAN's COUNT), index members and blob folders the census reads per run. */
export const CENSUS_PER_SWEEP = 20_000;

export async function sweep(
  rt: Runtime,
  now = Date.now(),
  opts: { censusPerSweep?: number; expiredPerSweep?: number } = {},
): Promise<SweepReport> {
  const report: SweepReport = {
    expired: 0,
    orphans: 0,
    keysDeleted: 0,
    orphanBlobs: 0,
    jobsTrimmed: 0,
    rateLimitsReleased: 0,
    approvalsTimedOut: 0,
    endsCounted: 0,
    censusPassEnded: false,
  };
  // First: a goal swept below never has a pending call (only terminal goals go).
  report.approvalsTimedOut = await expireApprovals(rt, now);
  // Before any goal goes: one that ended uncounted is counted while its record is still there.
  report.endsCounted = await countMissedEnds(rt, now);
  const expired = await expiredGoals(rt, now, opts.expiredPerSweep ?? EXPIRED_PER_SWEEP);
  const census = await takeCensus(rt, opts.censusPerSweep ?? CENSUS_PER_SWEEP, await ownsBlobStore(rt));
  report.censusPassEnded = census.passEnded;
  const { doomed, timed } = await judge(rt, [...new Set([...expired, ...census.ids])], now, report);
  await measureCensus(rt, census, doomed, now, report);
  // Deadlines first: a run that dies after the goals left every index leaves nothing to find them by.
  await removeDeadlines(rt, timed);
  if (doomed.size > 0) await removeGoals(rt, doomed, census, report);
  report.jobsTrimmed = await trimCompletedJobs(rt);
  report.rateLimitsReleased = await releaseIdleRateLimits(rt);

  for (const [reason, n] of [
    ['retention', report.expired],
    ['orphan', report.orphans],
  ] as const)
    if (n) rt.metrics.sweptGoals.inc({ reason }, n);
  return report;
}

/** The goals that ended before the retention's cutoff, oldest first, `limit` at most. */
function expiredGoals(rt: Runtime, now: number, limit: number): Promise<string[]> {
  const cutoff = now - rt.cfg.retentionSeconds * 1000;
  return rt.redis.zrangebyscore(rt.goals.keys.endedGoals(), '-inf', cutoff, 'LIMIT', 0, limit);
}

/**
 * The census slice's goals that stay: their artifact bytes counted towards the pass's gauge
 * (each goal once a pass: where its goal hash came up), their orphan blobs pruned.
 */
async function measureCensus(rt: Runtime, census: Census, doomed: Set<string>, now: number, report: SweepReport) {
  const measured = census.hashIds.filter((id) => !doomed.has(id));
  const { referenced, inline, spilled } = await readIndexes(rt, measured, census.blobGoals);
  const olderThan = now - rt.cfg.vfs.orphanBlobGraceSeconds * 1000;
  report.orphanBlobs = await pruneOrphanBlobs(rt, referenced, olderThan);
  const pass = await saveCensusBytes(rt, census, inline, spilled);
  if (!pass) return;
  rt.metrics.vfsBytes.set({ storage: 'inline' }, pass.inline);
  rt.metrics.vfsBytes.set({ storage: 'spilled' }, pass.spilled);
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

/**
 * Which goals go: finished before the cutoff, or with no goal hash at all; and which of those
 * may have a deadline job (a time budget, or no hash to tell).
 */
async function judge(rt: Runtime, ids: string[], now: number, report: SweepReport) {
  const cutoff = now - rt.cfg.retentionSeconds * 1000;
  const doomed = new Set<string>();
  const timed: string[] = [];
  const read = (p: ChainableCommander, goalId: string) =>
    p.hmget(rt.goals.keys.goal(goalId), 'status', 'finishedAt', 'budgets');
  await eachGoal(rt, ids, read, (goalId, [value]) => {
    const [status, finishedAt, budgets] = (value as (string | null)[] | null) ?? [null, null, null];
    if (status && !(isTerminal(status) && Number(finishedAt ?? 0) <= cutoff)) return;
    report[status ? 'expired' : 'orphans']++;
    doomed.add(goalId);
    if (!status || hasTimeBudget(budgets)) timed.push(goalId);
  });
  return { doomed, timed };
}

/** Whether a goal's stored budgets (JSON) have a time budget; unreadable ones count as having one. */
function hasTimeBudget(budgets: string | null): boolean {
  try {
    return (JSON.parse(budgets ?? '{}') as { maxSeconds?: number }).maxSeconds !== undefined;
  } catch {
    return true;
  }
}

/**
 * Reads the file index (and history) of each goal once: its live entries' bytes (tombstones are
 * 0), and for the goals that have a blob directory, the blob refs their entries point to.
 */
async function readIndexes(rt: Runtime, goalIds: string[], withBlobs: ReadonlySet<string>) {
  const bytes = { inline: 0, spilled: 0 };
  const referenced = new Map<string, Set<string>>();
  // Each goal's index, then, for a goal with blobs, its history: a revised artifact's old
  // versions keep their blobs. Only then: old versions hold their inline content, up to the
  // whole goal's worth a read. (HLEN, a reply of the same shape, for the others.)
  const read = (p: ChainableCommander, goalId: string) => {
    const history = rt.goals.keys.history(goalId);
    p.hvals(rt.goals.keys.files(goalId));
    return withBlobs.has(goalId) ? p.hvals(history) : p.hlen(history);
  };
  await eachGoal(rt, goalIds, read, (goalId, [values, history]) => {
    const kept = withBlobs.has(goalId) ? new Set<string>() : undefined;
    if (kept) referenced.set(goalId, kept);
    countEntries(values as string[], Array.isArray(history) ? (history as string[]) : [], bytes, kept);
  });
  return { referenced, ...bytes };
}

/** Adds a goal's live entries' bytes to `bytes`, and every blob ref its entries name to `kept`. */
function countEntries(
  values: string[],
  history: string[],
  bytes: { inline: number; spilled: number },
  kept?: Set<string>,
): void {
  for (const raw of history) {
    const ref = (JSON.parse(raw) as { blobRef?: string }).blobRef;
    if (ref) kept?.add(ref);
  }
  for (const raw of values) {
    const e = JSON.parse(raw) as { status?: string; bytes?: number; blobRef?: string };
    // A tombstone keeps no pointer, but a ref is a ref: never remove what an entry names.
    if (e.blobRef) kept?.add(e.blobRef);
    if (e.status === 'evicted') continue;
    if (e.blobRef) bytes.spilled += e.bytes ?? 0;
    else bytes.inline += e.bytes ?? 0;
  }
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
 * Unlinks the doomed goals' keys: the fixed ones, their transcripts (named in their threads
 * index) and any other key of theirs the census slice came upon; then their index entries and
 * blobs. UNLINK frees big hashes off the main thread. A key is unlinked only when its id part is
 * a doomed goal id; a stray key of one outside the slice is an orphan the census finds later.
 */
async function removeGoals(rt: Runtime, doomed: Set<string>, census: Census, report: SweepReport) {
  const keys = rt.goals.keys;
  const gone = [...doomed];
  const unlink = async (all: string[]) => {
    for (let i = 0; i < all.length; i += BATCH) report.keysDeleted += await rt.redis.unlink(...all.slice(i, i + BATCH));
  };
  const fixed = gone.flatMap((goalId) => keys.goalKeys(goalId));
  const transcripts = await transcriptKeys(rt, gone);
  const known = new Set([...fixed, ...transcripts]);
  const strays = census.keys.filter((key) => doomed.has(idOfKey(rt, key)) && !known.has(key));
  const keyed = await keysOf(rt, gone);
  await unlink([...transcripts, ...strays, ...fixed]);
  await nextKeyGenerations(rt, keyed);
  for (let i = 0; i < gone.length; i += BATCH) {
    const batch = gone.slice(i, i + BATCH);
    const p = rt.redis.pipeline();
    for (const index of [keys.goalsIndex(), keys.liveGoals(), keys.endedGoals(), keys.uncountedEnds()])
      p.zrem(index, ...batch);
    await p.exec();
  }
  // Only the folders the store has (none when it is another deployment's: nothing of ours is there).
  for (const goalId of gone) if (census.blobGoals.has(goalId)) await rt.vfs.blobs.deleteGoal(goalId);
}

/**
 * How long a key's count of swept goals is kept: past the longest a BullMQ job of a swept goal is
 * kept (a failed one, a week), its ids are free again.
 */
const KEY_GENERATION_TTL_SECONDS = 30 * 86_400;

/** The idempotency keys of the keyed goals among `goalIds` (24 hex characters), by their first goal's id. */
async function keysOf(rt: Runtime, goalIds: string[]): Promise<string[]> {
  const keyed = goalIds.filter((id) => id.length === KEYED_GOAL_ID_LENGTH);
  const out: string[] = [];
  const read = (p: ChainableCommander, goalId: string) => p.hget(rt.goals.keys.goal(goalId), 'keyOf');
  // A goal made before `keyOf` was stored is its key's first.
  await eachGoal(rt, keyed, read, (goalId, [keyOf]) => out.push((keyOf as string | null) ?? goalId));
  return out;
}

/** Each key's next goal gets a new id: the swept one's jobs may still be kept (job ids start with it). */
async function nextKeyGenerations(rt: Runtime, firstIds: string[]): Promise<void> {
  for (let i = 0; i < firstIds.length; i += BATCH) {
    const p = rt.redis.pipeline();
    for (const id of firstIds.slice(i, i + BATCH)) {
      p.incr(rt.goals.keys.keyGeneration(id)).expire(rt.goals.keys.keyGeneration(id), KEY_GENERATION_TTL_SECONDS);
    }
    await p.exec();
  }
}

/** The transcript keys the goals' threads indexes name. */
async function transcriptKeys(rt: Runtime, goalIds: string[]): Promise<string[]> {
  const out: string[] = [];
  const read = (p: ChainableCommander, goalId: string) => p.zrange(rt.goals.keys.threads(goalId), '0', '-1');
  await eachGoal(rt, goalIds, read, (goalId, [threadIds]) => {
    for (const threadId of threadIds as string[]) out.push(rt.goals.keys.transcript(goalId, threadId));
  });
  return out;
}

/**
 * Reads goals a pipeline of BATCH at a time: `read` queues one goal's commands (the same number
 * for each), `visit` gets that goal's replies. A command's error throws.
 */
async function eachGoal(
  rt: Runtime,
  goalIds: string[],
  read: (p: ChainableCommander, goalId: string) => ChainableCommander,
  visit: (goalId: string, replies: unknown[]) => void,
): Promise<void> {
  for (let i = 0; i < goalIds.length; i += BATCH) {
    const chunk = goalIds.slice(i, i + BATCH);
    const p = rt.redis.pipeline();
    for (const goalId of chunk) read(p, goalId);
    const res = (await p.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    const each = res.length / Math.max(1, chunk.length);
    chunk.forEach((goalId, j) => {
      visit(
        goalId,
        res.slice(j * each, (j + 1) * each).map(([, v]) => v),
      );
    });
  }
}

/**
 * A goal with a time budget that ended before it has a deadline job still delayed, up to the
 * budget (ten years at most): it goes with the goal. One removal per such goal, a batch at a time.
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
