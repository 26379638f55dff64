// `deepq enqueue --key`: an idempotent submission. A producer that sends the same request again
// (a retry after a timeout, a resent job of its own) gets the same goal and adds nothing; the
// same key with another request is refused, naming the goal. The CLI runs as a user runs it,
// against a private Redis; no service runs, so the goal stays queued with its one plan job.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const cwd = mkdtempSync(join(tmpdir(), 'deepq-key-'));
const changed = mkdtempSync(join(tmpdir(), 'deepq-key-'));
after(() => {
  for (const d of [cwd, changed]) rmSync(d, { recursive: true, force: true });
});
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
  const refusals: [string[], string][] = [
    [['Write a parser!', '--file', 'a.md', '--file', 'b.md'], 'another goal text'],
    [['Write a parser', '--file', 'a.md'], 'a file fewer'],
    [['Write a parser', '--file', 'a.md', '--file', 'b.md', '--max-steps', '3'], 'a budget'],
    [['Write a parser', '--file', 'a.md', '--file', 'b.md', '--review'], 'review'],
  ];
  // The same names, b.md's content changed.
  writeFileSync(join(changed, 'a.md'), 'A');
  writeFileSync(join(changed, 'b.md'), 'B, changed');
  refusals.push([['Write a parser', '--file', join(changed, 'a.md'), '--file', join(changed, 'b.md')], 'a content']);
  for (const [args, what] of refusals) {
    const r = await enqueue(...args, '--key', 'order-77');
    assert.equal(r.code, 1, what);
    const said = `idempotency key "order-77" was already used for another request: goal ${goalId} (queued)`;
    assert.ok(r.stderr.includes(said), `${what}: ${r.stderr}`);
  }
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
  for (const [key, problem] of [
    ['', 'the idempotency key is empty'],
    ['k'.repeat(201), 'the idempotency key is over 200 characters'],
    ['a\u0007b', 'the idempotency key has control characters'],
  ]) {
    const r = await runCli(['enqueue', 'a goal', '--key', key!], env);
    assert.equal(r.code, 1);
    assert.ok(r.stderr.includes(problem!), r.stderr);
  }
  const a = await runCli(['enqueue', 'twice'], env);
  const b = await runCli(['enqueue', 'twice'], env);
  assert.notEqual(a.stdout.trim(), b.stdout.trim());
  assert.match(a.stdout.trim(), /^[0-9a-f]{12}$/);
});
