// The TTL sweep: finished goals older than the retention lose every key and blob; running
// goals stay; keys of goals that no longer exist go; names that are not goal ids (planted blob
// directories, index members, keys) never make it delete anything; a live goal's unreferenced
// blobs and write leftovers go after the grace; every goal key has an EXPIRE backstop; and the
// reflector's job scheduler really runs the sweep.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { sweep } from '../../services/reflector/sweep.ts';
import { saveTranscript } from '../../shared/agent/transcripts.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import type { Plan } from '../../shared/goal/plan.ts';
import type { TerminalStatus } from '../../shared/goal/status.ts';
import {
  deadlineJobId,
  MAINTENANCE_QUEUE,
  RECONCILE_SCHEDULER_ID,
  SWEEP_SCHEDULER_ID,
} from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { type ServiceProc, startProcess, stopProcess, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { keysOfGoal, useVfsRuntime, type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const DAY = 86_400_000;

/** A goal with everything a goal can own: inline and spilled artifacts, a tombstone, events, a transcript. */
async function populatedGoal(v: VfsTestRuntime = t): Promise<string> {
  const goalId = await v.newGoal('populated goal');
  const { rt } = v;
  await dispatch(rt, goalId);
  const m = (writer: string, step = 1) => ({
    status: 'done' as const,
    step,
    role: 'critic',
    threadId: `goal-${goalId}--critic-1`,
    writer,
  });
  await rt.vfs.write(goalId, 'old.md', 'evict me', m('a'));
  await rt.vfs.write(goalId, 'inline.md', 'hello', m('b', 4));
  await rt.vfs.write(goalId, 'big.csv', 'x'.repeat(rt.cfg.vfs.spillBytes + 1), m('c', 4));
  await rt.vfs.evict(goalId, 5);
  await rt.goals.appendEvent(goalId, {
    type: 'subtask_started',
    step: 5,
    index: 0,
    role: 'critic',
    artifact: 'critique.json',
    threadId: `goal-${goalId}--critic-5`,
    attempt: 1,
  });
  await saveTranscript(rt, goalId, `goal-${goalId}--critic-abcd1234`, 'critic', [{ role: 'user', content: 'task' }]);
  assert.ok(existsSync(v.blobDirOf(goalId)));
  return goalId;
}

const PLAN: Plan = {
  subtasks: [{ role: 'critic', instruction: 'review the code', expected_artifact: 'critique.json', read_files: [] }],
};

/** queued → planning → running at cycle 1, as the planner moves a goal. */
async function dispatch(rt: Runtime, goalId: string): Promise<void> {
  assert.ok(await rt.lifecycle.beginPlanning(goalId));
  assert.ok(await rt.lifecycle.dispatch(goalId, 1, PLAN));
}

/**
 * Ends a goal (queued or running) through the transitions that reach `status` in production;
 * returns its finishedAt.
 */
async function finish(rt: Runtime, goalId: string, status: TerminalStatus = 'done'): Promise<number> {
  const lc = rt.lifecycle;
  if (status === 'done') {
    if ((await rt.goals.mustGet(goalId)).status === 'queued') await dispatch(rt, goalId);
    assert.ok(await lc.beginReflecting(goalId));
    assert.ok(
      await lc.complete(goalId, {
        step: 1,
        reflection: { decision: 'end', reason: 'the goal is met' },
        outcomes: [{ index: 0, status: 'done' }],
      }),
    );
  } else if (status === 'failed') assert.ok(await lc.fail(goalId, 'reflector output rejected', 1));
  else if (status === 'cancelled') assert.ok(await lc.cancel(goalId, 1));
  else assert.ok(await lc.exceedBudget(goalId, 'token budget exceeded', 1));
  const g = await rt.goals.mustGet(goalId);
  assert.equal(g.status, status);
  return g.finishedAt!;
}

const inIndex = async (goalId: string) => (await redis.client.zscore(t.rt.goals.keys.goalsIndex(), goalId)) !== null;

test('a finished goal older than the retention loses every key and blob', async () => {
  const goalId = await populatedGoal();
  const finishedAt = await finish(t.rt, goalId);
  const keys = await keysOfGoal(t.rt, goalId);
  for (const k of ['', ':files', ':content', ':events'])
    assert.ok(keys.includes(t.rt.goals.keys.goal(goalId) + k), `missing ${k}`);
  assert.ok(keys.some((k) => k.includes(':thread:')));

  const report = await sweep(t.rt, finishedAt + t.rt.cfg.retentionSeconds * 1000 + 1);
  assert.ok(report.expired >= 1);
  assert.ok(report.keysDeleted >= keys.length);
  assert.deepEqual(await keysOfGoal(t.rt, goalId), []);
  assert.equal(await inIndex(goalId), false);
  assert.ok(!existsSync(t.blobDirOf(goalId)), "the goal's blobs are gone");
});

test('every terminal status is swept after the retention', async () => {
  const ids: string[] = [];
  for (const status of ['done', 'failed', 'cancelled', 'budget_exceeded'] as const) {
    const goalId = await t.newGoal();
    await t.rt.vfs.write(goalId, 'a.md', 'x', { status: 'done', step: 1, writer: 'w' });
    await finish(t.rt, goalId, status);
    ids.push(goalId);
  }
  await sweep(t.rt, Date.now() + t.rt.cfg.retentionSeconds * 1000 + 1000);
  for (const goalId of ids) assert.deepEqual(await keysOfGoal(t.rt, goalId), []);
});

test("a time-budget goal's deadline job goes with the goal; a live goal's stays", async () => {
  const maintenance = t.rt.queues.get(MAINTENANCE_QUEUE);
  const [old, young] = [newGoalId(), newGoalId()];
  // As `enqueue --max-seconds 86400` stores the goal and adds its deadline: due in a day, long
  // after both goals end.
  for (const goalId of [old, young]) {
    await t.rt.goals.create(goalId, 'a timed goal', { maxSeconds: 86_400 }, false);
    await t.rt.queues.addDeadline(goalId, Date.now() + DAY);
  }
  const finishedAt = await finish(t.rt, old);
  await sweep(t.rt, finishedAt + t.rt.cfg.retentionSeconds * 1000 + 1);
  assert.equal(await maintenance.getJob(deadlineJobId(old)), undefined, 'the swept goal left its deadline behind');
  assert.equal(await maintenance.getJobState(deadlineJobId(young)), 'delayed');
});

test('a finished goal younger than the retention is kept', async () => {
  const goalId = await populatedGoal();
  const finishedAt = await finish(t.rt, goalId);
  const keys = await keysOfGoal(t.rt, goalId);
  await sweep(t.rt, finishedAt + t.rt.cfg.retentionSeconds * 1000 - 1000);
  assert.deepEqual(await keysOfGoal(t.rt, goalId), keys);
  assert.ok(await inIndex(goalId));
  assert.ok(existsSync(t.blobDirOf(goalId)));
  assert.equal(await t.rt.vfs.read(goalId, 'inline.md'), 'hello');
});

test('running and paused goals are kept, however old', async () => {
  const running = await populatedGoal();
  const paused = await populatedGoal();
  assert.ok(await t.rt.lifecycle.beginReflecting(paused));
  assert.ok(
    await t.rt.lifecycle.awaitHuman(
      paused,
      { step: 1, reflection: { decision: 'escalate', reason: 'max depth 5 reached' }, outcomes: [] },
      'escalation',
    ),
  );
  const queued = await t.newGoal();
  const before = {
    running: await keysOfGoal(t.rt, running),
    paused: await keysOfGoal(t.rt, paused),
    queued: await keysOfGoal(t.rt, queued),
  };
  await sweep(t.rt, Date.now() + 365 * DAY);
  assert.deepEqual(await keysOfGoal(t.rt, running), before.running);
  assert.deepEqual(await keysOfGoal(t.rt, paused), before.paused);
  assert.deepEqual(await keysOfGoal(t.rt, queued), before.queued);
  assert.ok(existsSync(t.blobDirOf(running)));
  assert.equal(await t.rt.vfs.read(running, 'big.csv'), 'x'.repeat(t.rt.cfg.vfs.spillBytes + 1));
});

test('keys and blobs of goals that no longer exist are swept', async () => {
  // A goal whose hash is gone (its backstop TTL fired, or a crash mid-delete) but whose
  // other keys, index entry and blobs remain.
  const goalId = await populatedGoal();
  await redis.client.del(t.rt.goals.keys.goal(goalId));
  // Keys of a goal id that never had a hash or index entry.
  const ghost = newGoalId();
  await redis.client.hset(t.rt.goals.keys.files(ghost), 'x.md', '{}');
  await redis.client.set(t.rt.goals.keys.transcript(ghost, `goal-${ghost}--critic-1`), '{}');
  // A blob dir with no goal at all.
  const blobOnly = newGoalId();
  mkdirSync(t.blobDirOf(blobOnly), { recursive: true });
  writeFileSync(join(t.blobDirOf(blobOnly), 'a'.repeat(64)), 'orphan');
  // An index entry with nothing behind it.
  const indexOnly = newGoalId();
  await redis.client.zadd(t.rt.goals.keys.goalsIndex(), Date.now(), indexOnly);

  const report = await sweep(t.rt);
  assert.ok(report.orphans >= 4, `orphans: ${report.orphans}`);
  for (const id of [goalId, ghost, blobOnly, indexOnly]) {
    assert.deepEqual(await keysOfGoal(t.rt, id), [], `keys of ${id} remain`);
    assert.ok(!existsSync(t.blobDirOf(id)), `blobs of ${id} remain`);
    assert.equal(await inIndex(id), false);
  }
});

test("another deployment's goals in a shared blob dir (same prefix, another Redis) are never swept", async () => {
  // This file's deployment owns the store once it has swept; its spilled goal is live.
  await sweep(t.rt);
  const ours = await populatedGoal();
  const ourBlobs = readdirSync(t.blobDirOf(ours));
  // A second deployment: the same blob dir and prefix, another Redis (DB 1), where that goal has no keys.
  const other = vfsRuntime(`${redis.url}/1`, { DEEPQ_PREFIX: t.rt.cfg.prefix, DEEPQ_BLOB_DIR: t.env.DEEPQ_BLOB_DIR });
  try {
    assert.equal(other.blobDirOf(ours), t.blobDirOf(ours));
    const report = await other.rt.vfs.blobs.listGoals();
    assert.ok(report.includes(ours), 'the other deployment sees the folder');
    const swept = await sweep(other.rt, Date.now() + 365 * DAY);
    assert.equal(swept.orphans, 0, 'not an orphan of the other deployment');
    assert.deepEqual(readdirSync(t.blobDirOf(ours)).sort(), ourBlobs.sort(), 'its spilled artifacts are all there');
    assert.equal((await t.rt.vfs.read(ours, 'big.csv'))?.length, t.rt.cfg.vfs.spillBytes + 1);
    // Its own deployment still sweeps it once it is gone from its Redis.
    await t.rt.redis.unlink(...(await keysOfGoal(t.rt, ours)));
    await sweep(t.rt);
    assert.equal(existsSync(t.blobDirOf(ours)), false);
  } finally {
    await other.rt.close(); // not other.close(): the blob dir is this file's
  }
});

test('the sweep touches nothing outside the goal namespace of its prefix', async () => {
  const p = t.rt.cfg.prefix;
  const foreign = [
    `${p}:plan:meta`,
    `${p}:maintenance:id`,
    `other:goal:${newGoalId()}:files`,
    `${p}goal:x`,
    'unrelated',
  ];
  for (const k of foreign) await redis.client.set(k, 'keep');
  await sweep(t.rt, Date.now() + 365 * DAY);
  for (const k of foreign) assert.equal(await redis.client.get(k), 'keep', `${k} was deleted`);
  await redis.client.del(...foreign);
});

test('blob directories whose names are not goal ids never make the sweep delete anything', async () => {
  const live = await populatedGoal();
  const root = join(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix);
  const planted = [`${live}:files`, `${live}:content`, 'NOT-A-GOAL', 'x', `${live}.bak`];
  for (const name of planted) {
    mkdirSync(join(root, name), { recursive: true });
    writeFileSync(join(root, name, 'a'.repeat(64)), 'planted');
  }
  const before = await keysOfGoal(t.rt, live);
  const blobsBefore = readdirSync(t.blobDirOf(live));
  const report = await sweep(t.rt, Date.now() + 365 * DAY);
  assert.deepEqual(await keysOfGoal(t.rt, live), before, 'the live goal lost keys');
  assert.deepEqual(readdirSync(t.blobDirOf(live)), blobsBefore);
  assert.equal(await t.rt.vfs.read(live, 'big.csv'), 'x'.repeat(t.rt.cfg.vfs.spillBytes + 1));
  assert.equal(await t.rt.vfs.read(live, 'inline.md'), 'hello');
  assert.ok(await inIndex(live));
  for (const name of planted) assert.ok(existsSync(join(root, name)), `${name} is not the sweep's to judge`);
  assert.equal(report.orphanBlobs, 0);
  for (const name of planted) rmSync(join(root, name), { recursive: true });
});

test('names of non-hash keys (events, threads) in the blob dir neither stop the sweep nor lose keys', async () => {
  // The old sweep read such a name as a goal hash: WRONGTYPE, and no goal was swept at all.
  const live = await populatedGoal();
  const expired = await t.newGoal();
  const finishedAt = await finish(t.rt, expired);
  const root = join(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix);
  for (const name of [`${live}:events`, `${live}:threads`]) mkdirSync(join(root, name), { recursive: true });
  const before = await keysOfGoal(t.rt, live);
  const report = await sweep(t.rt, finishedAt + t.rt.cfg.retentionSeconds * 1000 + 1);
  assert.ok(report.expired >= 1);
  assert.deepEqual(await keysOfGoal(t.rt, expired), []);
  assert.deepEqual(await keysOfGoal(t.rt, live), before, 'the live goal lost keys');
  for (const name of [`${live}:events`, `${live}:threads`]) rmSync(join(root, name), { recursive: true });
});

test('index members and keys whose id part is not a goal id are never swept', async () => {
  const live = await populatedGoal();
  const p = t.rt.cfg.prefix;
  // Members of the goals index that name a live goal's keys.
  const members = [`${live}:files`, `${live}:content`, 'NOT-A-GOAL'];
  for (const m of members) await redis.client.zadd(t.rt.goals.keys.goalsIndex(), Date.now(), m);
  // Keys under the goal namespace whose id part is not a goal id (no goal hash behind them).
  const odd = [`${p}:goal:NOT-A-GOAL:files`, `${p}:goal:x:content`, `${p}:goal:${live.toUpperCase()}X:files`];
  for (const k of odd) await redis.client.set(k, 'keep');
  const before = await keysOfGoal(t.rt, live);
  await sweep(t.rt, Date.now() + 365 * DAY);
  assert.deepEqual(await keysOfGoal(t.rt, live), before, 'the live goal lost keys');
  assert.equal(await t.rt.vfs.read(live, 'inline.md'), 'hello');
  for (const k of odd) assert.equal(await redis.client.get(k), 'keep', `${k} was deleted`);
  await redis.client.del(...odd);
  await redis.client.zrem(t.rt.goals.keys.goalsIndex(), ...members);
});

test('old unreferenced blobs and temp leftovers of a live goal go; referenced and young ones stay', async () => {
  const goalId = await t.newGoal();
  await dispatch(t.rt, goalId);
  const big = 'y'.repeat(t.rt.cfg.vfs.spillBytes + 1);
  const kept = await t.rt.vfs.write(goalId, 'big.csv', big, { status: 'done', step: 1, writer: 'w' });
  // Revised: the old version, its blob with it, is in the history; the new one is current.
  const meta = { status: 'done' as const, step: 2, writer: 'r', keepHistory: true };
  const current = await t.rt.vfs.write(goalId, 'big.csv', `${big}2`, meta);
  // A write whose script failed after its blob was stored leaves a blob no entry points to.
  const orphanOld = await t.rt.vfs.blobs.put(goalId, 'orphan, old');
  const orphanYoung = await t.rt.vfs.blobs.put(goalId, 'orphan, young');
  const dir = t.blobDirOf(goalId);
  const tmpOld = `${'c'.repeat(64)}.4242.k3j4.tmp`;
  const tmpYoung = `${'d'.repeat(64)}.4242.k3j4.tmp`;
  for (const f of [tmpOld, tmpYoung]) writeFileSync(join(dir, f), 'half a blob');
  const file = (ref: string) => ref.split('/')[1]!;
  const grace = t.rt.cfg.vfs.orphanBlobGraceSeconds * 1000;
  const past = new Date(Date.now() - grace - 60_000);
  const referenced = [file(kept.blobRef!), file(current.blobRef!)];
  for (const f of [...referenced, file(orphanOld), tmpOld]) utimesSync(join(dir, f), past, past);

  const report = await sweep(t.rt);
  assert.equal(report.orphanBlobs, 2);
  assert.deepEqual(readdirSync(dir).sort(), [...referenced, file(orphanYoung), tmpYoung].sort());
  assert.equal(await t.rt.vfs.read(goalId, 'big.csv'), `${big}2`, 'the referenced blob stays, however old');
  assert.equal(await t.rt.vfs.blobs.get(kept.blobRef!), big, "the history's blob stays");
  assert.equal(await t.rt.vfs.blobs.get(orphanYoung), 'orphan, young');
  assert.equal((await t.rt.goals.mustGet(goalId)).status, 'running');

  // Once the young ones are past the grace too, they go; the referenced blob still stays.
  const later = await sweep(t.rt, Date.now() + grace + 60_000);
  assert.equal(later.orphanBlobs, 2);
  assert.deepEqual(readdirSync(dir).sort(), referenced.sort());
  assert.equal(await t.rt.vfs.read(goalId, 'big.csv'), `${big}2`);
});

test('the orphan-blob grace is configurable', async () => {
  const c = vfsRuntime(redis.url, {}, { vfs: { orphanBlobGraceSeconds: 10 } });
  try {
    const goalId = await c.newGoal();
    const ref = await c.rt.vfs.blobs.put(goalId, 'orphan');
    const past = new Date(Date.now() - 11_000);
    utimesSync(join(c.blobDirOf(goalId), ref.split('/')[1]!), past, past);
    assert.equal((await sweep(c.rt)).orphanBlobs, 1);
    assert.deepEqual(readdirSync(c.blobDirOf(goalId)), []);
  } finally {
    await c.close();
  }
});

test('every goal key carries an EXPIRE backstop', async () => {
  const goalId = await populatedGoal();
  await t.rt.goals.addUsage(goalId, 'critic', 'scripted', { input: 10, output: 5, cache_read: 0, cache_write: 0 });
  await finish(t.rt, goalId);
  const keys = await keysOfGoal(t.rt, goalId);
  assert.ok(keys.length >= 5);
  for (const key of keys) {
    const ttl = await redis.client.ttl(key);
    const max = key.includes(':thread:') ? t.rt.cfg.transcriptTtlSeconds : t.rt.cfg.goalKeyTtlSeconds;
    assert.ok(ttl > 0 && ttl <= max, `${key} has TTL ${ttl}`);
  }
});

test('eviction refreshes the backstop on the keys it touches', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'a.md', 'x', { status: 'done', step: 1, writer: 'w' });
  for (const key of [t.rt.vfs.keys.files(goalId), t.rt.vfs.keys.events(goalId)]) await redis.client.expire(key, 100);
  await t.rt.vfs.evict(goalId, 5);
  for (const key of [t.rt.vfs.keys.files(goalId), t.rt.vfs.keys.events(goalId)]) {
    assert.ok((await redis.client.ttl(key)) > 100, `${key} TTL not refreshed`);
  }
});

test('the reflector process runs the sweep on its job scheduler', async () => {
  const p = vfsRuntime(redis.url, { DEEPQ_SWEEP_INTERVAL_SECONDS: '1', DEEPQ_RETENTION_SECONDS: '1' });
  let svc: ServiceProc | undefined;
  try {
    const finished = await populatedGoal(p);
    await finish(p.rt, finished);
    const running = await populatedGoal(p);
    const runningKeys = await keysOfGoal(p.rt, running);
    assert.ok((await keysOfGoal(p.rt, finished)).length >= 5);

    svc = startProcess('reflector', ['reflector'], { ...p.env, LOG_LEVEL: 'info' });
    await waitForStart(svc);
    const scheduler = await p.rt.queues.get(MAINTENANCE_QUEUE).getJobScheduler(SWEEP_SCHEDULER_ID);
    assert.equal(scheduler?.every, 1000);

    // Wait for the sweep job to finish: keys first, then blobs, then the job's completion.
    const queue = p.rt.queues.get(MAINTENANCE_QUEUE);
    const swept = async () => ({
      keys: (await keysOfGoal(p.rt, finished)).length,
      blobs: existsSync(p.blobDirOf(finished)),
      job: (await queue.getCompleted()).some(
        (j) => j.name === 'sweep' && (j.returnvalue as { expired?: number } | null)?.expired === 1,
      ),
    });
    const deadline = Date.now() + 30_000;
    for (let s = await swept(); s.keys > 0 || s.blobs || !s.job; s = await swept()) {
      assert.ok(
        Date.now() < deadline,
        `the finished goal was not swept (${JSON.stringify(s)}):\n${svc.output().slice(-3000)}`,
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(await keysOfGoal(p.rt, running), runningKeys, 'the running goal lost keys');
    assert.ok(existsSync(p.blobDirOf(running)));
    assert.equal(await p.rt.vfs.read(running, 'inline.md'), 'hello');
  } finally {
    if (svc) await stopProcess(svc);
    await p.close();
  }
});

test('a Redis that comes back without its data gets the maintenance schedules again', async () => {
  // Last in the file: the restart loses every key (no persistence).
  const p = vfsRuntime(redis.url, { DEEPQ_SWEEP_INTERVAL_SECONDS: '1' });
  const svc = startProcess('reflector', ['reflector'], { ...p.env, LOG_LEVEL: 'info' });
  try {
    await waitForStart(svc);
    const queue = p.rt.queues.get(MAINTENANCE_QUEUE);
    assert.ok(await queue.getJobScheduler(SWEEP_SCHEDULER_ID));
    await redis.server.restart(300);
    const deadline = Date.now() + 30_000;
    // Both, each in turn: the reflector writes the sweep's schedule first, then the reconciler's
    // (a CI run read the second just between the two).
    for (const id of [SWEEP_SCHEDULER_ID, RECONCILE_SCHEDULER_ID]) {
      while (!(await queue.getJobScheduler(id).catch(() => undefined))) {
        assert.ok(Date.now() < deadline, `no ${id} schedule after the restart:\n${svc.output().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } finally {
    await stopProcess(svc);
    await p.close();
  }
});
