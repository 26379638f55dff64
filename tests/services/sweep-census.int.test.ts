// The sweep's work per run is bounded however many goals are kept: goals past their retention
// come off the ended-goals index, all of them in one run; keys of goals that no longer exist are
// found by a census that reads a slice of the namespace per run and goes on where it stopped;
// the artifact byte gauge is the count of a whole pass.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sweep } from '../../services/reflector/sweep.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { useRedis } from '../../testing/redis.ts';
import { keysOfGoal, useVfsRuntime, type VfsTestRuntime, writeMeta } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

/** Keys of `n` goals that no longer exist (their goal hash gone): what the census must find. */
async function strayKeys(n: number): Promise<string[]> {
  const keys = Array.from({ length: n }, () => t.rt.goals.keys.files(newGoalId()));
  const p = redis.client.pipeline();
  for (const key of keys) p.hset(key, 'a.md', '{}');
  await p.exec();
  return keys;
}

const gauge = async (storage: string) =>
  (await t.rt.metrics.vfsBytes.get()).values.find((v) => v.labels.storage === storage)?.value;

test('a run removes every goal past its retention but reads only a slice of the rest', {
  timeout: 60_000,
}, async () => {
  const strays = await strayKeys(3000);
  const ended: string[] = [];
  for (let i = 0; i < 40; i++) {
    const goalId = await t.newGoal(`ended ${i}`);
    assert.ok(await t.rt.lifecycle.fail(goalId, 'a planner failure', 1));
    ended.push(goalId);
  }
  const running = await t.newGoal('still running');
  await t.rt.vfs.write(running, 'notes.md', '12345', writeMeta('w1', { status: 'active' }));
  const later = Date.now() + t.rt.cfg.retentionSeconds * 1000 + 1000;

  const first = await sweep(t.rt, later, { censusPerSweep: 1000 });
  assert.equal(first.expired, 40, 'goals past their retention are all found in one run');
  for (const goalId of ended) assert.deepEqual(await keysOfGoal(t.rt, goalId), []);
  assert.equal(await redis.client.zcard(t.rt.goals.keys.endedGoals()), 0);
  assert.ok(!first.censusPassEnded, 'one SCAN call of 1,000 slots covered 3,000 keys');
  assert.ok(first.orphans < strays.length, `the first run judged ${first.orphans} stray goals`);

  let runs = 1;
  let orphans = first.orphans;
  for (let last = first; !last.censusPassEnded; runs++) {
    assert.ok(runs < 30, 'the census never ended its pass');
    last = await sweep(t.rt, later, { censusPerSweep: 1000 });
    orphans += last.orphans;
  }
  assert.ok(runs > 1);
  assert.equal(orphans, strays.length);
  assert.equal(await redis.client.exists(...strays), 0);
  assert.equal((await t.rt.goals.get(running))?.status, 'queued', 'a running goal stays');
  assert.ok(await t.rt.vfs.stat(running, 'notes.md'));
});

/** Sweeps until a run ends the census's pass (its cursor may be anywhere after another test). */
async function toPassEnd(): Promise<void> {
  for (let i = 0; i < 30; i++) if ((await sweep(t.rt)).censusPassEnded) return;
  assert.fail('the census never ended its pass');
}

test('a pass that ends in one run counts every kept goal, and the next pass counts afresh', async () => {
  await toPassEnd();
  const before = (await gauge('inline')) ?? 0;
  const a = await t.newGoal('a');
  const b = await t.newGoal('b');
  await t.rt.vfs.write(a, 'x.md', 'abc', writeMeta('w1'));
  await t.rt.vfs.write(b, 'y.md', 'defgh', writeMeta('w2'));
  await toPassEnd();
  assert.equal(await gauge('inline'), before + 8);
  await t.rt.vfs.write(b, 'y.md', 'de', writeMeta('w2'));
  assert.ok((await sweep(t.rt)).censusPassEnded, 'a small namespace: a pass in one run');
  assert.equal(await gauge('inline'), before + 5);
  // A run that died after ending its pass's walk left that pass's partial count: not carried on.
  await redis.client.hset(t.rt.goals.keys.sweepCensus(), 'inline', 9999);
  assert.ok((await sweep(t.rt)).censusPassEnded);
  assert.equal(await gauge('inline'), before + 5);
});
