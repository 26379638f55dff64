// A goal awaiting a human keeps every key without a TTL for as long as it may wait (its awaiting
// retention, a month by default, past the keys' week): the artifact history too, and keys a
// write makes or touches while it waits (a subtask finishing after a budget pause) get no TTL
// back. Otherwise they expire under the wait, and the sweep then deletes their blobs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, writeMeta } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const meta = writeMeta;
const ttl = (key: string) => redis.client.ttl(key);

/** A goal in planning, then paused at its token budget (awaiting_human). */
async function pause(goalId: string): Promise<void> {
  await t.rt.lifecycle.beginPlanning(goalId);
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: 'out of tokens' }, 1));
}

test("a revised artifact's history loses its TTL with the goal's other keys when the goal waits", async () => {
  const goalId = await t.newGoal();
  const k = t.rt.goals.keys;
  await t.rt.vfs.write(goalId, 'a.md', 'v1', meta('w1'));
  await t.rt.vfs.write(goalId, 'a.md', 'v2', meta('w2', { keepHistory: true }));
  assert.ok((await ttl(k.history(goalId))) > 0, 'a history key has a TTL while the goal works');
  await pause(goalId);
  assert.equal((await t.rt.goals.get(goalId))?.status, 'awaiting_human');
  for (const key of [k.goal(goalId), k.files(goalId), k.content(goalId), k.history(goalId)])
    assert.equal(await ttl(key), -1, key);
});

test('writes while the goal waits give its keys no TTL back: a new name, a first file, a revision', async () => {
  const k = t.rt.goals.keys;
  const waiting = await t.newGoal();
  await t.rt.vfs.write(waiting, 'first.md', 'x', meta('w1'));
  await pause(waiting);
  await t.rt.vfs.write(waiting, 'second.md', 'y', meta('w2'));
  await t.rt.vfs.write(waiting, 'first.md', 'x2', meta('w3', { keepHistory: true }));
  for (const key of [k.files(waiting), k.content(waiting), k.history(waiting)]) assert.equal(await ttl(key), -1, key);
  // A goal that had no file yet when it paused: its first write makes the files index.
  const empty = await t.newGoal();
  await pause(empty);
  await t.rt.vfs.write(empty, 'late.md', 'z', meta('w4'));
  assert.equal(await ttl(k.files(empty)), -1);
  assert.equal(await ttl(k.content(empty)), -1);
  // A working goal's first write still gets the backstop TTL.
  const working = await t.newGoal();
  await t.rt.vfs.write(working, 'a.md', 'x', meta('w5'));
  assert.ok((await ttl(k.files(working))) > 0 && (await ttl(k.content(working))) > 0);
});

test('an eviction while the goal waits (a pause during the reflection) gives its keys no TTL back', async () => {
  const goalId = await t.newGoal();
  const k = t.rt.goals.keys;
  await t.rt.vfs.write(goalId, 'keep.md', 'work', meta('w5', { status: 'active', step: 5 }));
  await t.rt.vfs.write(goalId, 'old.md', 'x', meta('w1'));
  await pause(goalId);
  // The reflect job moved the goal into reflecting, then the pause landed; its eviction runs now.
  assert.deepEqual(
    (await t.rt.vfs.evict(goalId, 10)).map((e) => e.name),
    ['old.md'],
  );
  for (const key of [k.files(goalId), k.content(goalId), k.events(goalId), k.history(goalId)])
    assert.ok((await ttl(key)) < 0, `${key} has a TTL again`);
});
