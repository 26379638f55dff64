// `watch` (and `enqueue --wait`, the same follow) on a goal no planner takes, because no
// service runs on this Redis and prefix: once the goal has waited 20 s for its first plan the CLI
// says so on stderr, once, instead of waiting in silence. A planner that is connected but has not
// got to the goal (busy; here its queue is paused) is no news: nothing is said. The wait counts
// from the goal's creation, so the goals here are made 25 s old (their createdAt moved back)
// rather than waited out.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { runCli, startProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const HINT = /has waited \d+ s for its first plan: no planner is connected to this Redis \(deepq up starts/g;

/** A goal enqueued through the deployment of `env`, made `ageMs` old. */
async function goalOfAge(env: NodeJS.ProcessEnv, text: string, ageMs: number): Promise<string> {
  const client = new GoalClient(loadConfig(env));
  try {
    const goalId = await client.enqueue({ goal: text });
    await redis.client.hset(client.goals.keys.goal(goalId), 'createdAt', Date.now() - ageMs);
    return goalId;
  } finally {
    await client.close();
  }
}

test('a follow with no planner connected says so once the goal waited 20 s, once; with one connected, nothing', {
  timeout: 120_000,
}, async () => {
  await redis.ready;
  // Two deployments on one Redis (each env has its own prefix): one without services, one whose
  // planner is up with its queue paused.
  const none = testEnv(redis.url, { LOG_LEVEL: 'warn' });
  const busy = testEnv(redis.url, { LOG_LEVEL: 'warn' });
  const plans = new Queue(PLAN_QUEUE, { connection: { url: redis.url }, prefix: busy.DEEPQ_PREFIX });
  try {
    await plans.pause();
    await waitForStart(startProcess('planner', ['planner'], busy));
    const [young, old, behindBusy] = await Promise.all([
      goalOfAge(none, 'a goal nobody plans, just made', 0),
      goalOfAge(none, 'a goal nobody plans', 25_000),
      goalOfAge(busy, 'a goal behind a paused planner', 25_000),
    ]);
    // Killed after some seconds of following: many polls, one hint. 14 s leaves a loaded machine
    // time to start three CLIs, and still keeps the young goal under the 20 s.
    const [fresh, alone, waiting] = await Promise.all([
      runCli(['watch', young], none, 14_000),
      runCli(['watch', old], none, 14_000),
      runCli(['watch', behindBusy], busy, 14_000),
    ]);
    for (const r of [fresh, alone, waiting]) assert.equal(r.code, null, 'the follow was still waiting');
    assert.equal(alone.stderr.match(HINT)?.length, 1, alone.stderr);
    assert.doesNotMatch(fresh.stderr, /for its first plan/, 'said before the goal waited 20 s');
    assert.doesNotMatch(waiting.stderr, /for its first plan/);
  } finally {
    await plans.close();
  }
});

test('Ctrl-C on a follow says the goal goes on and how to stop it, exits 130, leaves the goal as it was', async () => {
  await redis.ready;
  const env = testEnv(redis.url, { LOG_LEVEL: 'warn' });
  const goalId = await goalOfAge(env, 'a goal followed, then left', 0);
  for (const args of [
    ['watch', goalId],
    ['enqueue', 'a second goal, left at once', '--wait'],
  ]) {
    const cli = startProcess(args[0]!, args, env);
    // Following: the goal's first event line is out (a non-TTY follow prints one line per event).
    for (let t = 0; !/created/.test(cli.output()); t++) {
      if (t > 400) throw new Error(`no event line:\n${cli.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    cli.proc.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => cli.proc.once('exit', (c) => resolve(c)));
    assert.equal(code, 130, cli.output());
    const followed = args[0] === 'watch' ? goalId : cli.output().trim().split('\n')[0]!;
    const hint = `stopped following; goal ${followed} goes on (deepq cancel ${followed} stops it`;
    assert.ok(cli.output().includes(hint), cli.output());
    const client = new GoalClient(loadConfig(env));
    assert.equal((await client.get(followed)).status, 'queued');
    await client.close();
  }
});

test('a planner connected to another database of the same Redis is named as such, not taken for one', {
  timeout: 120_000,
}, async () => {
  await redis.ready;
  const env = testEnv(redis.url, { LOG_LEVEL: 'warn' });
  // The same prefix, database 1: CLIENT LIST lists its planner beside this database's clients.
  await waitForStart(startProcess('planner-db1', ['planner'], { ...env, REDIS_URL: `${redis.url}/1` }));
  const goalId = await goalOfAge(env, 'a goal on database 0', 25_000);
  const watch = startProcess('watch', ['watch', goalId], env);
  const hint = /no planner is connected to database 0 of this Redis, only to database 1: is REDIS_URL the/;
  for (let t = 0; !hint.test(watch.output()); t++) {
    if (t > 300) throw new Error(`no hint naming the databases:\n${watch.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(watch.proc.exitCode, null, 'the follow was still waiting');
  watch.proc.kill('SIGKILL');
});
