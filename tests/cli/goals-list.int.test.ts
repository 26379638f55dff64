// `deepq goals`: the newest 1000 goals, saying so when there are more; `--status S` finds the
// newest goals in that status however old (a goal awaiting a human for weeks is still listed);
// an unknown status is refused, naming the valid ones.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newGoalId } from '../../shared/goal/ids.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { openState } from '../../shared/runtime/state.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('goals --status finds an old goal past the newest 1000, and a cut list is said to be cut', {
  timeout: 120_000,
}, async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const state = openState(loadConfig(env), 'test');
  let oldest: string;
  try {
    oldest = newGoalId();
    await state.goals.create(oldest, 'the oldest goal, awaiting a human', {}, false);
    // A stand-in for a goal paused long ago: only its status matters here.
    await state.redis.hset(state.goals.keys.goal(oldest), 'status', 'awaiting_human');
    // Older by the index's score (its creation time), not tied with the next ones.
    await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => state.goals.create(newGoalId(), `goal ${i + j}`, {}, false)),
      );
    }
  } finally {
    await state.close();
  }
  const waiting = await runCli(['goals', '--status', 'awaiting_human', '--json'], env);
  assert.equal(waiting.code, 0, waiting.stderr);
  const rows = JSON.parse(waiting.stdout) as { goalId: string; status: string }[];
  assert.deepEqual(
    rows.map((r) => [r.goalId, r.status]),
    [[oldest, 'awaiting_human']],
  );
  assert.equal(waiting.stderr, '');
  const all = await runCli(['goals'], env);
  assert.equal(all.code, 0, all.stderr);
  assert.equal(all.stdout.trim().split('\n').length, 1 + 1000, 'header and 1000 goals');
  assert.doesNotMatch(all.stdout, new RegExp(oldest));
  assert.match(all.stderr, /^deepq: showing the newest 1000 goals \(--status S narrows the list\); older ones/);
});

test('goals --status with an unknown status is refused, naming the valid ones', async () => {
  await redis.ready;
  const r = await runCli(['goals', '--status', 'bogus'], testEnv(redis.url));
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /argument 'bogus' is invalid\. Allowed choices are queued, planning, running, reflecting, /);
  assert.match(r.stderr, /awaiting_human, done, failed, cancelled, budget_exceeded/);
  assert.equal(r.stdout, '');
});

test("goals: a keyed goal's 24-character id keeps its columns apart, every row aligned", async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const keyed = await runCli(['enqueue', '--key', 'columns-key', 'a keyed goal'], env);
  assert.equal(keyed.code, 0, keyed.stderr);
  const plain = await runCli(['enqueue', 'a goal of its own id'], env);
  assert.equal(plain.code, 0, plain.stderr);
  const r = await runCli(['goals'], env);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  const statusAt = lines.map((l) => l.search(/STATUS|queued/));
  assert.ok(/^[0-9a-f]{24}\s+queued/m.test(r.stdout), r.stdout);
  assert.deepEqual(new Set(statusAt).size, 1, `the status column starts at one place:\n${r.stdout}`);
});

test("status: the per-model token lines keep one column past a long 'role @ model'", async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const state = openState(loadConfig(env), 'test');
  const goalId = newGoalId();
  try {
    await state.goals.create(goalId, 'a goal of two models', {}, false);
    const usage = { input: 10, output: 2, cache_read: 0, cache_write: 0 };
    await state.goals.addUsage(goalId, 'planner', 'scripted-high', usage);
    await state.goals.addUsage(goalId, 'research-specialist', `provider-x:${'a-very-long-model-id-'.repeat(3)}`, usage);
  } finally {
    await state.close();
  }
  const r = await runCli(['status', goalId], env);
  assert.equal(r.code, 0, r.stderr);
  const rows = r.stdout.split('\n').filter((l) => / @ .* in \d+ out \d+/.test(l));
  assert.equal(rows.length, 2, r.stdout);
  assert.equal(new Set(rows.map((l) => l.indexOf(' in '))).size, 1, `one column:\n${rows.join('\n')}`);
  // Each model's cost line starts its cost in that column too.
  const costs = [...r.stdout.matchAll(/^ {2}[^\s@]+\s+(?=~\$|price unknown)/gm)].map((m) => m[0].length);
  assert.equal(costs.length, 2, r.stdout);
  assert.deepEqual(new Set(costs), new Set([rows[0]!.indexOf(' in ') + 1]), r.stdout);
});
