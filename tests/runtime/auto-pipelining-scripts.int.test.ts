// deepq's state client auto-pipelines: a script called in the same tick as other commands,
// on a brand-new client, must run in the same pipeline rather than break the batch.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GoalLifecycle } from '../../shared/goal/lifecycle.ts';
import { GoalStore } from '../../shared/goal/store.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { useRedis } from '../../testing/redis.ts';

const LIMITS = { keyTtlSeconds: 3600, eventsMaxLen: 100 };
const redis = useRedis();

test('a fresh auto-pipelined client runs scripts and plain commands issued together', async () => {
  await redis.ready;
  await new GoalStore(redis.client, 'ap', LIMITS).create('ap0000000001', 'a goal', {}, false);
  const client = createRedis(redis.url, 'test', { autoPipelining: true });
  try {
    const goals = new GoalStore(client, 'ap', LIMITS);
    const lifecycle = new GoalLifecycle(client, goals.keys, goals.opts);
    // Same tick: a plain command opens the auto-pipeline, then a script joins it.
    const [status, moved, again] = await Promise.all([
      client.hget('ap:goal:ap0000000001', 'status'),
      lifecycle.beginPlanning('ap0000000001'),
      client.hget('ap:goal:ap0000000001', 'goal'),
    ]);
    assert.equal(status, 'queued');
    assert.ok(moved, 'the move was refused');
    assert.equal(again, 'a goal');
  } finally {
    client.disconnect();
  }
});
