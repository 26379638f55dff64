// A goal transition is safe to run twice: ioredis sends a call again when its reply was lost,
// and the replay must report the move as made (not refused), changing nothing more.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runScript } from '../../shared/runtime/scripts.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

/** The exact call the lifecycle makes, sent twice with the same arguments (one operation id). */
async function sendTwice(goalId: string, from: string, to: string, op: string) {
  const k = t.rt.goals.keys;
  const keys = [k.goal(goalId), k.events(goalId), k.files(goalId), k.content(goalId), k.liveGoals()];
  keys.push(k.transcript(goalId, ''), k.threads(goalId), k.reservations(goalId), k.history(goalId), k.endedGoals());
  const event = JSON.stringify({ type: 'resumed', step: 0, action: 'x', at: Date.now() });
  const args = [from, to, Date.now(), goalId, event, 100, 3600, op, '', '', 0];
  return [
    await runScript(t.rt.redis, 'goalTransition', keys, args),
    await runScript(t.rt.redis, 'goalTransition', keys, args),
  ];
}

test('a re-sent transition (same operation id) reports success and appends nothing twice', async () => {
  const goalId = await t.newGoal();
  const [first, replay] = await sendTwice(goalId, 'queued', 'planning', 'op-1');
  assert.deepEqual(first, ['queued', '0']);
  assert.ok(replay, 'the replay of a move that was made must not read as refused');
  assert.equal((await t.rt.goals.get(goalId))!.status, 'planning');
  const resumed = (await t.rt.goals.events(goalId)).filter((e) => e.event.type === 'resumed');
  assert.equal(resumed.length, 1, 'the replay appended its event again');
});

test('a different operation from the same state is still refused', async () => {
  const goalId = await t.newGoal();
  await sendTwice(goalId, 'queued', 'planning', 'op-a');
  const [other] = await sendTwice(goalId, 'queued', 'planning', 'op-b');
  assert.equal(other, null, 'a new operation must see the goal has left queued');
});

test('the replay of a move into a terminal status still reports success', async () => {
  const goalId = await t.newGoal();
  const [first, replay] = await sendTwice(goalId, '*', 'cancelled', 'op-end');
  assert.deepEqual(first, ['queued', '0']);
  assert.deepEqual(replay, ['cancelled', '0']);
});

test('the operation ids kept per goal stay bounded', async () => {
  const goalId = await t.newGoal();
  for (let i = 0; i < 40; i++) await t.rt.lifecycle.beginPlanning(goalId);
  const ops = (await t.rt.redis.hget(t.rt.goals.keys.goal(goalId), 'ops')) ?? '';
  assert.equal(ops.split('|').filter(Boolean).length, 16);
});

test('a goal awaiting a human keeps its keys; leaving that status sets the TTL again', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'a.md', 'x', { status: 'done', step: 1, writer: 'w' });
  const lc = t.rt.lifecycle;
  assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
  const k = t.rt.goals.keys;
  for (const key of [k.goal(goalId), k.events(goalId), k.files(goalId), k.content(goalId)]) {
    assert.equal(await t.rt.redis.ttl(key), -1, `${key} must not expire while a human decides`);
  }
  assert.ok(await lc.resume(goalId, 1, 'replan', 1));
  for (const key of [k.goal(goalId), k.events(goalId), k.files(goalId), k.content(goalId)]) {
    assert.ok((await t.rt.redis.ttl(key)) > 0, `${key} has its backstop TTL again`);
  }
  assert.equal((await t.rt.goals.get(goalId))!.resumes, 1);
});
