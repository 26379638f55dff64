// Per-cycle eviction (P51): done entries older than 3 steps, any entry older than 20 (both
// configurable); tombstones in the index, dropped later; events and metrics.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plannerMessage } from '../../services/planner/prompt.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { formatIndex, VirtualFs } from '../../shared/vfs/vfs.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

type Status = 'active' | 'done' | 'failed';
const write = (vfs: VirtualFs, goalId: string, name: string, status: Status, step: number) =>
  vfs.write(goalId, name, `content of ${name}`, {
    status,
    step,
    role: 'research-specialist',
    threadId: `goal-${goalId}--research-specialist-1`,
    writer: `${goalId}:${step}:${name}`,
  });

async function evictionCount(rt: Runtime, reason: string): Promise<number> {
  const m = await rt.metrics.vfsEvictions.get();
  return m.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

test("the defaults are the seed's: done after 3 steps, anything after 20", () => {
  assert.equal(t.rt.cfg.vfs.evictDoneAfterSteps, 3);
  assert.equal(t.rt.cfg.vfs.evictAnyAfterSteps, 20);
});

test('a done entry older than 3 steps is evicted; one 3 steps old is kept', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'old.md', 'done', 1);
  await write(t.rt.vfs, goalId, 'young.md', 'done', 2);
  assert.deepEqual(await t.rt.vfs.evict(goalId, 4), [], 'age 3 is not older than 3');
  assert.deepEqual(await t.rt.vfs.evict(goalId, 5), [{ name: 'old.md', reason: 'done_aged' }]);
  assert.equal((await t.rt.vfs.stat(goalId, 'young.md'))!.status, 'done');
  assert.deepEqual(await t.rt.vfs.evict(goalId, 6), [{ name: 'young.md', reason: 'done_aged' }]);
});

test('active and failed entries stay until they are older than 20 steps, then go with reason max_age', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'draft.md', 'active', 1);
  await write(t.rt.vfs, goalId, 'broken.json', 'failed', 1);
  await write(t.rt.vfs, goalId, 'done.md', 'done', 1);
  assert.deepEqual(await t.rt.vfs.evict(goalId, 5), [{ name: 'done.md', reason: 'done_aged' }]);
  assert.deepEqual(await t.rt.vfs.evict(goalId, 21), [], 'age 20 is not older than 20');
  const evicted = await t.rt.vfs.evict(goalId, 22);
  assert.deepEqual(
    evicted.sort((a, b) => a.name.localeCompare(b.name)),
    [
      { name: 'broken.json', reason: 'max_age' },
      { name: 'draft.md', reason: 'max_age' },
    ],
  );
});

test('a done entry older than 20 steps is counted as max_age', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'ancient.md', 'done', 1);
  assert.deepEqual(await t.rt.vfs.evict(goalId, 30), [{ name: 'ancient.md', reason: 'max_age' }]);
});

test('both thresholds are configurable', async () => {
  const c = vfsRuntime(redis.url, {}, { vfs: { evictDoneAfterSteps: 1, evictAnyAfterSteps: 5 } });
  try {
    assert.equal(c.rt.vfs.opts.evictDoneAfterSteps, 1);
    assert.equal(c.rt.vfs.opts.evictAnyAfterSteps, 5);
    const goalId = await c.newGoal();
    await write(c.rt.vfs, goalId, 'done.md', 'done', 1);
    await write(c.rt.vfs, goalId, 'active.md', 'active', 1);
    assert.deepEqual(await c.rt.vfs.evict(goalId, 2), []);
    assert.deepEqual(await c.rt.vfs.evict(goalId, 3), [{ name: 'done.md', reason: 'done_aged' }]);
    assert.deepEqual(await c.rt.vfs.evict(goalId, 6), []);
    assert.deepEqual(await c.rt.vfs.evict(goalId, 7), [{ name: 'active.md', reason: 'max_age' }]);
  } finally {
    await c.close();
  }
});

test('an evicted name leaves a tombstone in the index, which the planner sees', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'gone.md', 'done', 1);
  await write(t.rt.vfs, goalId, 'kept.md', 'done', 4);
  await t.rt.vfs.evict(goalId, 5);
  const index = await t.rt.vfs.index(goalId);
  const tomb = index.find((e) => e.name === 'gone.md')!;
  assert.equal(tomb.status, 'evicted');
  assert.equal(tomb.bytes, 0);
  assert.equal(tomb.step, 1);
  assert.equal(tomb.evictedStep, 5);
  assert.equal(tomb.reason, 'done_aged');
  assert.equal(tomb.version, 1);
  assert.equal(tomb.blobRef, undefined);
  assert.match(formatIndex(index), /^- gone\.md \[evicted\]$/m);
  assert.match(formatIndex(index), /^- kept\.md \[done, \d+ bytes\]$/m);
  const goal = (await t.rt.goals.get(goalId))!;
  assert.match(plannerMessage(goal, 6, index), /gone\.md \[evicted\]/);
});

test("tombstones are dropped later: by default at the next cycle's eviction", async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'gone.md', 'done', 1);
  await t.rt.vfs.evict(goalId, 5);
  assert.equal((await t.rt.vfs.stat(goalId, 'gone.md'))!.status, 'evicted');
  // A re-delivered reflect job evicts again at the same step: the tombstone stays.
  await t.rt.vfs.evict(goalId, 5);
  assert.equal((await t.rt.vfs.stat(goalId, 'gone.md'))!.status, 'evicted');
  await t.rt.vfs.evict(goalId, 6);
  assert.equal(await t.rt.vfs.stat(goalId, 'gone.md'), null);
  assert.deepEqual(await t.rt.vfs.index(goalId), []);
});

test('tombstone retention is an option of the virtual FS', async () => {
  const vfs = new VirtualFs(t.rt.redis, t.rt.cfg.prefix, t.rt.vfs.blobs, { ...t.rt.vfs.opts, tombstoneSteps: 3 });
  const goalId = await t.newGoal();
  await write(vfs, goalId, 'gone.md', 'done', 1);
  await vfs.evict(goalId, 5);
  for (const step of [6, 7]) {
    await vfs.evict(goalId, step);
    assert.equal((await vfs.stat(goalId, 'gone.md'))?.status, 'evicted', `tombstone gone at step ${step}`);
  }
  await vfs.evict(goalId, 8);
  assert.equal(await vfs.stat(goalId, 'gone.md'), null);
});

test('an evicted artifact reads as null and its content is gone from Redis', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'gone.md', 'done', 1);
  assert.equal(await t.rt.vfs.read(goalId, 'gone.md'), 'content of gone.md');
  await t.rt.vfs.evict(goalId, 5);
  assert.equal(await t.rt.vfs.read(goalId, 'gone.md'), null);
  assert.equal(await redis.client.hexists(t.rt.vfs.keys.content(goalId), 'gone.md'), 0);
});

test('writing an evicted name again makes it live with the next version', async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'again.md', 'done', 1);
  await t.rt.vfs.evict(goalId, 5);
  const e = await t.rt.vfs.write(goalId, 'again.md', 'fresh', {
    status: 'active',
    step: 5,
    writer: 'new-writer',
    expectedVersion: 0,
  });
  assert.equal(e.version, 2);
  assert.equal(await t.rt.vfs.read(goalId, 'again.md'), 'fresh');
  assert.equal((await t.rt.vfs.stat(goalId, 'again.md'))!.status, 'active');
});

test("eviction appends an evicted event to the goal's timeline, once", async () => {
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'a.md', 'done', 1);
  await write(t.rt.vfs, goalId, 'b.md', 'active', 1);
  await t.rt.vfs.evict(goalId, 5);
  await t.rt.vfs.evict(goalId, 5); // re-delivered: nothing more to evict, no duplicate event
  await t.rt.vfs.evict(goalId, 22);
  const evicted = (await t.rt.goals.events(goalId)).map((e) => e.event).filter((e) => e.type === 'evicted');
  assert.deepEqual(
    evicted.map(({ name, reason, step }) => ({ name, reason, step })),
    [
      { name: 'a.md', reason: 'done_aged', step: 5 },
      { name: 'b.md', reason: 'max_age', step: 22 },
    ],
  );
  for (const e of evicted) assert.ok(typeof e.at === 'number' && e.at > 0);
});

test('deepq_vfs_evictions_total{reason} counts each eviction by reason', async () => {
  const done0 = await evictionCount(t.rt, 'done_aged');
  const max0 = await evictionCount(t.rt, 'max_age');
  const goalId = await t.newGoal();
  await write(t.rt.vfs, goalId, 'd1.md', 'done', 1);
  await write(t.rt.vfs, goalId, 'd2.md', 'done', 1);
  await write(t.rt.vfs, goalId, 'f.md', 'failed', 1);
  await t.rt.vfs.evict(goalId, 5);
  assert.equal(await evictionCount(t.rt, 'done_aged'), done0 + 2);
  assert.equal(await evictionCount(t.rt, 'max_age'), max0);
  await t.rt.vfs.evict(goalId, 22);
  assert.equal(await evictionCount(t.rt, 'max_age'), max0 + 1);
  const text = await t.rt.metrics.registry.metrics();
  assert.match(text, /^deepq_vfs_evictions_total\{reason="done_aged",service="test"\} \d+$/m);
  assert.ok(
    !text.split('\n').some((l) => l.startsWith('deepq_vfs_evictions_total') && l.includes(goalId)),
    'no goal id in labels',
  );
});

test("eviction of one goal never touches another goal's files", async () => {
  const a = await t.newGoal();
  const b = await t.newGoal();
  await write(t.rt.vfs, a, 'x.md', 'done', 1);
  await write(t.rt.vfs, b, 'x.md', 'done', 1);
  await t.rt.vfs.evict(a, 10);
  assert.equal(await t.rt.vfs.read(a, 'x.md'), null);
  assert.equal(await t.rt.vfs.read(b, 'x.md'), 'content of x.md');
});
