// P51 beyond the files: transcripts are capped per goal and per block, the timeline is a
// capped stream, and deepq_vfs_bytes reports the live artifact bytes after each sweep.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sweep } from '../../services/reflector/sweep.ts';
import { loadTranscript, saveTranscript } from '../../shared/agent/transcripts.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { useRedis } from '../../testing/redis.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
before(async () => {
  await redis.ready;
  t = vfsRuntime(redis.url, { DEEPQ_TRANSCRIPTS_PER_GOAL: '3' }, { vfs: { spillBytes: 1000 } });
});
after(async () => t?.close());

test('a goal keeps only its newest transcripts, and each stored block is capped', async () => {
  const goalId = await t.newGoal();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = threadIdFor(goalId, 'critic', `t${i}`);
    ids.push(id);
    await saveTranscript(t.rt, goalId, id, 'critic', [
      { role: 'user', content: 'x'.repeat(10_000) },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: `answer ${i}` },
          { type: 'tool_use', id: 'tu', name: 'write_file', input: { name: 'a', content: 'y'.repeat(9000) } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu', content: 'z'.repeat(9000) }] },
    ]);
    await new Promise((r) => setTimeout(r, 2));
  }
  const kept = await Promise.all(ids.map((id) => loadTranscript(t.rt, id)));
  assert.deepEqual(
    kept.map((k) => k !== null),
    [false, false, true, true, true],
  );
  assert.equal(await t.rt.redis.zcard(t.rt.goals.keys.threads(goalId)), 3);
  const last = kept[4]!;
  const body = JSON.stringify(last);
  assert.ok(body.length < 8000, `stored transcript is ${body.length} chars`);
  assert.match(String(last.messages[0]!.content), /chars elided from the stored transcript/);
  assert.match(body, /answer 4/);
});

test("a goal's threads index gets its TTL when made, not per save; the goal's moves renew it", async () => {
  const goalId = await t.newGoal();
  const threads = t.rt.goals.keys.threads(goalId);
  const save = (n: number) => saveTranscript(t.rt, goalId, threadIdFor(goalId, 'critic', `s${n}`), 'critic', []);
  await save(0);
  // The goal's backstop, not the transcripts' (the index must list a goal's runs as long as it lives).
  assert.ok((await t.rt.redis.ttl(threads)) > t.rt.cfg.goalKeyTtlSeconds - 60);
  await t.rt.redis.expire(threads, 100);
  await save(1);
  assert.ok((await t.rt.redis.ttl(threads)) <= 100, 'a second save set the TTL again');
  // A move that renews the goal's keys renews the index with them; a pause keeps it.
  await t.rt.redis.hset(t.rt.goals.keys.goal(goalId), 'ttlAt', 1);
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  assert.ok((await t.rt.redis.ttl(threads)) > t.rt.cfg.goalKeyTtlSeconds - 60, 'not renewed with the goal');
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: 'r' }, 0));
  assert.equal(await t.rt.redis.ttl(threads), -1, 'the index expires while a human decides');
});

test('the timeline stream stays near its cap however many events a goal has', async () => {
  const goalId = await t.newGoal();
  const p = t.rt.redis.pipeline();
  for (let i = 0; i < 3000; i++)
    p.xadd(t.rt.goals.keys.events(goalId), 'MAXLEN', '~', t.rt.cfg.eventsMaxLen, '*', 'e', '{}');
  await p.exec();
  await t.rt.goals.appendEvent(goalId, {
    type: 'subtask_started',
    step: 1,
    index: 0,
    role: 'critic',
    artifact: 'critique.json',
    threadId: threadIdFor(goalId, 'critic', 'a'),
    attempt: 1,
  });
  const len = await t.rt.redis.xlen(t.rt.goals.keys.events(goalId));
  assert.ok(len <= t.rt.cfg.eventsMaxLen + 100, `stream holds ${len}`);
});

test('deepq_vfs_bytes reports live inline and spilled bytes after a sweep, not bytes ever written', async () => {
  const a = await t.newGoal();
  await t.rt.vfs.write(a, 'small.md', 'x'.repeat(300), { status: 'done', step: 1, writer: 'w' });
  await t.rt.vfs.write(a, 'big.md', 'y'.repeat(5000), { status: 'done', step: 1, writer: 'w' });
  await t.rt.vfs.write(a, 'small.md', 'x'.repeat(100), { status: 'done', step: 1, writer: 'w' });
  const b = await t.newGoal();
  await t.rt.vfs.write(b, 'old.md', 'o'.repeat(700), { status: 'done', step: 1, writer: 'w' });
  await t.rt.vfs.evict(b, 10);
  await sweep(t.rt);
  const get = async (storage: string) =>
    (await t.rt.metrics.vfsBytes.get()).values.find((v) => v.labels.storage === storage)?.value;
  // Goals of earlier tests hold no files; these two hold 100 inline + 5000 spilled live bytes.
  assert.equal(await get('inline'), 100);
  assert.equal(await get('spilled'), 5000);
});
