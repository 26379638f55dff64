// `deepq enqueue --key`: an idempotent submission. A producer that sends the same request again
// (a retry after a timeout, a resent job of its own) gets the same goal and adds nothing; the
// same key with another request is refused, naming the goal. The CLI runs as a user runs it,
// against a private Redis; no service runs, so the goal stays queued with its one plan job.

import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { GoalClient, type GoalSubmission } from '../../cli/goal-client.ts';
import { GoalRequestSchema } from '../../cli/goal-request.ts';
import { goalIdForKey, requestFingerprint } from '../../cli/goal-submission.ts';
import { sweep } from '../../services/reflector/sweep.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
const cwd = tempDir('deepq-key-');
after(() => rmSync(cwd, { recursive: true, force: true }));
writeFileSync(join(cwd, 'a.md'), 'A');
writeFileSync(join(cwd, 'b.md'), 'B');

async function withClient<T>(env: NodeJS.ProcessEnv, fn: (c: GoalClient) => Promise<T>): Promise<T> {
  const client = new GoalClient(loadConfig(env));
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

test('the same request under a key is one goal with one plan job; another request under it is refused', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const enqueue = (...args: string[]) => runCli(['enqueue', ...args], env, 60_000, cwd);
  const first = await enqueue('Write a parser', '--key', 'order-77', '--file', 'a.md', '--file', 'b.md');
  assert.equal(first.code, 0, first.stderr);
  const goalId = first.stdout.trim();
  assert.match(goalId, /^[0-9a-f]{24}$/);
  assert.equal(first.stderr, '');
  // Sent again, its files in another order: the same request.
  const again = await enqueue('Write a parser', '--file', 'b.md', '--file', 'a.md', '--key', 'order-77');
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout.trim(), goalId);
  assert.match(again.stderr, new RegExp(`goal ${goalId} was already submitted with this key`));
  // Another request under the key: once through the CLI (its exit code and message), then each
  // way a request can differ through the same client call.
  const said = `idempotency key "order-77" was already used for another request: goal ${goalId} (queued)`;
  const other = await enqueue('Write a parser!', '--file', 'a.md', '--file', 'b.md', '--key', 'order-77');
  assert.equal(other.code, 1);
  assert.ok(other.stderr.includes(said), other.stderr);
  const a = { name: 'a.md', content: 'A' };
  const b = { name: 'b.md', content: 'B' };
  const same = { goal: 'Write a parser', files: [a, b], key: 'order-77' };
  const others: [GoalSubmission, string][] = [
    [{ ...same, files: [a] }, 'a file fewer'],
    [{ ...same, files: [a, { ...b, content: 'B, changed' }] }, 'a content'],
    [{ ...same, budgets: { maxSteps: 3 } }, 'a budget'],
    [{ ...same, review: true }, 'review'],
  ];
  await withClient(env, async (c) => {
    assert.deepEqual(await c.submit({ ...same, files: [b, a] }), { goalId, created: false });
    for (const [request, what] of others)
      await assert.rejects(c.submit(request), (err: Error) => err.message === said, what);
  });
  await withClient(env, async (c) => {
    assert.deepEqual(
      (await c.list()).map((g) => g.goalId),
      [goalId],
    );
    assert.equal(await c.queues.get(PLAN_QUEUE).count(), 1, 'one plan job');
    assert.equal(await c.read(goalId, 'b.md'), 'B');
  });
});

test('five producers sending one keyed request at once make one goal', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const sent = await Promise.all(
    Array.from({ length: 5 }, () =>
      runCli(['enqueue', 'Once only', '--key', 'k-race', '--file', 'a.md'], env, 60_000, cwd),
    ),
  );
  for (const r of sent) assert.equal(r.code, 0, r.stderr);
  const ids = new Set(sent.map((r) => r.stdout.trim()));
  assert.equal(ids.size, 1, [...ids].join(' '));
  assert.equal(sent.filter((r) => r.stderr.includes('already submitted')).length, 4);
  await withClient(env, async (c) => {
    assert.equal((await c.list()).length, 1);
    assert.equal(await c.queues.get(PLAN_QUEUE).count(), 1);
  });
});

test('a bad key is refused, naming the problem; without a key the same text twice is two goals', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const bad = await runCli(['enqueue', 'a goal', '--key', ''], env);
  assert.equal(bad.code, 1);
  assert.ok(bad.stderr.includes('the idempotency key is empty'), bad.stderr);
  await withClient(env, async (c) => {
    for (const [key, problem] of [
      ['k'.repeat(201), 'the idempotency key is over 200 characters'],
      ['a\u0007b', 'the idempotency key has control characters'],
    ]) {
      await assert.rejects(c.submit({ goal: 'a goal', key }), (err: Error) => err.message.includes(problem!));
    }
    const [x, y] = [await c.submit({ goal: 'twice' }), await c.submit({ goal: 'twice' })];
    assert.notEqual(x.goalId, y.goalId);
    assert.match(x.goalId, /^[0-9a-f]{12}$/);
    assert.ok(x.created && y.created);
  });
});

test('the same request adds a first plan job a submission died before adding; none after it', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  await withClient(env, async (c) => {
    // What a submission leaves when it dies between storing its goal and adding the plan job.
    const req = GoalRequestSchema.parse({ goal: 'Half submitted', key: 'k-died' });
    const goalId = goalIdForKey('k-died');
    const request = `${requestFingerprint(req)}:op1`;
    await c.goals.createOrFind(goalId, req.goal, {}, false, { request });
    const plans = c.queues.get(PLAN_QUEUE);
    assert.equal(await plans.getJob(`${goalId}:1:plan`), undefined);
    assert.deepEqual(await c.submit({ goal: 'Half submitted', key: 'k-died' }), { goalId, created: false });
    assert.ok(await plans.getJob(`${goalId}:1:plan`), 'added by the same request');
    // Planned once and queued again (a resume): the same request adds no first plan job again.
    await plans.obliterate({ force: true });
    await c.goals.redis.hset(c.goals.keys.goal(goalId), 'step', '1');
    assert.deepEqual(await c.submit({ goal: 'Half submitted', key: 'k-died' }), { goalId, created: false });
    assert.equal(await plans.count(), 0);
  });
});

test("a key's goal swept, the key makes a new goal with an id of its own: the old one's jobs may be kept", async () => {
  await redis.ready;
  const v = vfsRuntime(redis.url);
  const client = new GoalClient(v.rt.cfg);
  try {
    const first = await client.submit({ goal: 'Sweep me', key: 'k-swept' });
    assert.equal(first.goalId, goalIdForKey('k-swept'));
    await client.cancel(first.goalId);
    // Past the retention: the sweep removes the goal. A job of it may still be kept (a failed
    // subtask's is kept a week): one stands in for it here, under the id the key first made.
    const report = await sweep(v.rt, Date.now() + 2 * v.rt.cfg.retentionSeconds * 1000);
    assert.equal(report.expired, 1);
    const plans = client.queues.get(PLAN_QUEUE);
    await plans.add('plan', { goalId: first.goalId, step: 1 }, { jobId: `${first.goalId}:1:plan`, delay: 3_600_000 });
    const again = await client.submit({ goal: 'Sweep me', key: 'k-swept' });
    assert.equal(again.created, true);
    assert.notEqual(again.goalId, first.goalId, 'the swept goal id again: its plan job would not be added');
    assert.match(again.goalId, /^[0-9a-f]{24}$/);
    assert.ok(await plans.getJob(`${again.goalId}:1:plan`), 'the new goal has its plan job');
    assert.equal((await client.get(again.goalId)).status, 'queued');
    // While it is kept, the key stands for it.
    assert.deepEqual(await client.submit({ goal: 'Sweep me', key: 'k-swept' }), {
      goalId: again.goalId,
      created: false,
    });
    // Swept in turn, the key's next goal has yet another id.
    await client.cancel(again.goalId);
    await sweep(v.rt, Date.now() + 2 * v.rt.cfg.retentionSeconds * 1000);
    const third = await client.submit({ goal: 'Sweep me', key: 'k-swept' });
    assert.ok(![first.goalId, again.goalId].includes(third.goalId), third.goalId);
  } finally {
    await client.close();
    await v.close();
  }
});

test('two requests under one key at once: the refused one stores nothing in the goal', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  await withClient(env, async (c) => {
    for (let i = 0; i < 5; i++) {
      const key = `k-race-${i}`;
      const send = (content: string) =>
        c.submit({ goal: 'write a report', key, files: [{ name: 'in.md', content }] }).catch((e: Error) => e);
      const [a, b] = await Promise.all([send('AAAA from A'), send('BBBB from B')]);
      const won = [a, b].filter((r) => !(r instanceof Error)) as { goalId: string }[];
      assert.equal(won.length, 1, `one accepted: ${a} / ${b}`);
      const refused = (a instanceof Error ? a : b) as Error;
      assert.match(refused.message, /was already used for another request/);
      const kept = await c.read(won[0]!.goalId, 'in.md');
      assert.equal(kept, a instanceof Error ? 'BBBB from B' : 'AAAA from A', "the accepted request's file");
    }
  });
});
