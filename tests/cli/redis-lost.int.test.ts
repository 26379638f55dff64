// `watch` and `enqueue --wait` follow a goal by reading Redis; when Redis goes away mid-follow
// they say so on stderr after a few seconds, carry on when it is back, and past
// --redis-timeout stop with exit 1 and an error naming Redis, never hanging silently.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { test } from 'node:test';
import { type PrivateRedis, startPrivateRedis } from '../../cli/private-redis.ts';
import { BIN } from '../../cli/supervisor.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { until } from '../../testing/until.ts';

interface Watching {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

/** `deepq <args>` running, its output collected as it comes. */
function start(args: string[], env: NodeJS.ProcessEnv): Watching {
  const proc = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, out: () => out, err: () => err, exited };
}

/** A queued goal (no services run: it stays queued) and `watch` following it. */
async function watchQueuedGoal(redis: PrivateRedis, extra: string[]) {
  const env = testEnv(redis.url);
  const enq = await runCli(['enqueue', 'a goal nobody runs'], env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  const watch = start(['watch', goalId, ...extra], env);
  await until(() => watch.out().includes('created'), 30_000, 'watch printing the goal');
  return { env, goalId, watch };
}

test('watch says when Redis is lost, and past --redis-timeout exits 1 naming Redis', async () => {
  const redis = await startPrivateRedis();
  let watch: Watching | undefined;
  try {
    ({ watch } = await watchQueuedGoal(redis, ['--redis-timeout', '12']));
    const stoppedAt = Date.now();
    await redis.stop();
    const lost = new RegExp(
      `deepq: lost the connection to Redis at redis://127\\.0\\.0\\.1:${redis.port} \\(.*ECONNREFUSED`,
    );
    await until(() => lost.test(watch!.err()), 15_000, `the lost-Redis notice (stderr: ${watch.err()})`);
    assert.equal(await watch.exited, 1, watch.err());
    const took = Date.now() - stoppedAt;
    assert.ok(took >= 11_000 && took < 25_000, `exited ${took} ms after Redis went`);
    assert.match(watch.err(), /deepq: error: no answer from Redis at redis:\/\/127\.0\.0\.1:\d+ for 12 s/);
    assert.match(watch.err(), /stopped following goal [0-9a-f]+ \(the goal is not cancelled/);
    assert.doesNotMatch(watch.err(), /\n\s+at /, 'a stack trace');
  } finally {
    watch?.proc.kill('SIGKILL');
    await redis.stop();
  }
});

test('watch carries on when Redis comes back, and says so', async () => {
  const redis = await startPrivateRedis({ appendonly: true });
  let watch: Watching | undefined;
  try {
    let env: NodeJS.ProcessEnv;
    let goalId: string;
    ({ env, goalId, watch } = await watchQueuedGoal(redis, []));
    await redis.restart(7_000);
    await until(() => /Redis at \S+ answers again/.test(watch!.err()), 30_000, `Redis back (stderr: ${watch.err()})`);
    assert.match(watch.err(), /lost the connection to Redis/);
    const cancel = await runCli(['cancel', goalId], env);
    assert.equal(cancel.code, 0, cancel.stderr);
    assert.equal(await watch.exited, 1, watch.err());
    assert.match(watch.out(), /finished: cancelled/);
  } finally {
    watch?.proc.kill('SIGKILL');
    await redis.stop();
  }
});
