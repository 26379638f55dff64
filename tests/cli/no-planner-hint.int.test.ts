// `enqueue --wait` (and `watch`) on a goal no planner takes, because no service runs on this
// Redis and prefix: after 20 s the CLI says so on stderr, once, instead of waiting in silence.
// A planner that is connected but has not got to the goal (busy; here its queue is paused) is
// no news: nothing is said.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { runCli, startProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const HINT = /has waited 2\d s for its first plan: no planner is connected to this Redis \(deepq up starts/g;

test('a follow with no planner connected says so after 20 s, once; with one connected, nothing', {
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
    const [alone, waiting] = await Promise.all([
      // Killed well after the 20 s: a loaded machine can take seconds to start a CLI.
      runCli(['enqueue', '--wait', 'a goal nobody plans'], none, 32_000),
      runCli(['enqueue', '--wait', 'a goal behind a paused planner'], busy, 32_000),
    ]);
    assert.equal(alone.code, null, 'the follow was still waiting');
    assert.equal(alone.stderr.match(HINT)?.length, 1, alone.stderr);
    assert.equal(waiting.code, null, 'the follow was still waiting');
    assert.doesNotMatch(waiting.stderr, /for its first plan/);
  } finally {
    await plans.close();
  }
});
