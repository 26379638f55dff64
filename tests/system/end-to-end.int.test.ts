// A goal runs end to end through real service processes, BullMQ and a private Redis.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { assertCliExit, type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
let fleet: Fleet;

before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '300' });
});
after(async () => {
  await fleet?.stop();
});

test('enqueue --wait --json ends done with the expected artifacts in Redis', async () => {
  const r = await runCli(['enqueue', 'Write a sorting function', '--wait', '--json'], fleet.env);
  await assertCliExit(r, 0, fleet);
  const last = JSON.parse(r.stdout.trim().split('\n').pop()!);
  assert.deepEqual(
    Object.keys(last).sort(),
    [
      'approvals',
      'artifacts',
      'createdAt',
      'finishedAt',
      'goalId',
      'pausedFor',
      'reason',
      'status',
      'steps',
      'usage',
    ].sort(),
  );
  assert.equal(last.status, 'done');
  assert.deepEqual([last.reason, last.pausedFor], ['the code was written and reviewed; the goal is met', null]);
  assert.equal(last.steps, 2);
  assert.deepEqual([...last.artifacts].sort(), ['critique.json', 'research.md', 'solution.py']);
  assert.ok(last.finishedAt >= last.createdAt);
  assert.deepEqual(last.approvals, []);
  assert.ok(last.usage.total.tokens.input > 0 && last.usage.total.tokens.output > 0, 'the calls booked tokens');

  // The artifacts are really in the goal's Redis hashes, under the prefix.
  const prefix = fleet.env.DEEPQ_PREFIX;
  const meta = await redis.client.hgetall(`${prefix}:goal:${last.goalId}:files`);
  assert.deepEqual(Object.keys(meta).sort(), ['critique.json', 'research.md', 'solution.py']);
  for (const raw of Object.values(meta)) assert.equal(JSON.parse(raw).status, 'done');
  const code = await redis.client.hget(`${prefix}:goal:${last.goalId}:content`, 'solution.py');
  // The code the block held, which Python compiles (a fence line would be a syntax error).
  assert.doesNotMatch(code!, /```/);
  execFileSync('python3', ['-c', 'import sys; compile(sys.stdin.read(), "solution.py", "exec")'], { input: code! });
  const critique = JSON.parse((await redis.client.hget(`${prefix}:goal:${last.goalId}:content`, 'critique.json'))!);
  assert.ok(Array.isArray(critique) && critique.length > 0);
});

test('subtasks of one cycle overlap in time and reflection runs after all of them', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Parallel check' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done');
  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  const c1 = events.filter((e) => 'step' in e && e.step === 1);
  const started = c1.filter((e) => e.type === 'subtask_started');
  const finished = c1.filter((e) => e.type === 'subtask_finished');
  assert.equal(started.length, 2);
  assert.equal(finished.length, 2);
  // Each subtask takes ≥ 300 ms of model latency; both start before either finishes.
  const lastStart = Math.max(...started.map((e) => e.at));
  const firstFinish = Math.min(...finished.map((e) => e.at));
  assert.ok(lastStart < firstFinish, `subtasks did not overlap: last start ${lastStart}, first finish ${firstFinish}`);
  const reflected = c1.find((e) => e.type === 'reflected')!;
  assert.ok(reflected.at >= Math.max(...finished.map((e) => e.at)), 'reflection ran before all subtasks finished');
});

test('status --json and artifacts --out work from the CLI', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'CLI check' });
  await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  const s = await runCli(['status', goalId, '--json'], fleet.env);
  assert.equal(s.code, 0, s.stderr);
  assert.equal(JSON.parse(s.stdout).status, 'done');
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const dir = tempDir('deepq-out-');
  const a = await runCli(['artifacts', goalId, '--out', dir], fleet.env);
  assert.equal(a.code, 0, a.stderr);
  assert.match(readFileSync(join(dir, 'solution.py'), 'utf8'), /def solve/);
});
