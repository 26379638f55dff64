// A Redis that may evict keys (allkeys-lru, volatile-*) loses goals, queued jobs and schedules
// under memory pressure: every service says so at start, in its structured log.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startProcess, stopProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('a service started on a Redis that evicts logs an error naming the policy and the fix', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const quiet = startProcess('planner-noeviction', ['planner'], env);
  await waitForStart(quiet);
  await stopProcess(quiet);
  assert.doesNotMatch(quiet.output(), /maxmemory-policy/, 'a warning under noeviction');

  await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    const p = startProcess('planner-lru', ['planner'], env);
    await waitForStart(p);
    await stopProcess(p);
    const line = p
      .output()
      .split('\n')
      .find((l) => l.includes('"maxmemoryPolicy"'));
    assert.ok(line, p.output());
    const rec = JSON.parse(line);
    assert.equal(rec.level, 50);
    assert.equal(rec.maxmemoryPolicy, 'allkeys-lru');
    assert.match(rec.msg, /deepq needs noeviction.*set maxmemory-policy noeviction/);
  } finally {
    await redis.client.config('SET', 'maxmemory-policy', 'noeviction');
  }
});
