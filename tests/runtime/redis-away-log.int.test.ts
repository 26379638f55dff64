// A service whose Redis turns every connection away (here: at its maxclients) says so in its log,
// naming the likely cause, at most once per 30 s while it retries (ioredis retries every 2 s);
// once Redis lets it in, it says so and starts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();

const lines = (out: string, msg: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; err?: { message: string }; level: number })
    .filter((l) => l.msg === msg);

test('a service at a Redis that turns it away logs why, once, and starts when let in', {
  timeout: 90_000,
}, async () => {
  await redis.ready;
  // The test's own connection is the one client allowed.
  await redis.client.config('SET', 'maxclients', '1');
  const svc = startProcess('planner', ['planner'], testEnv(redis.url));
  try {
    await until(() => lines(svc.output(), 'cannot reach Redis; retrying').length > 0, 30_000);
    // Several retries later (every 2 s at most), still the one line.
    await new Promise((r) => setTimeout(r, 7000));
    const logged = lines(svc.output(), 'cannot reach Redis; retrying');
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.match(logged[0]!.err!.message, /(EPIPE|ECONNRESET).*is it at its maxclients limit/);
  } finally {
    await redis.client.config('SET', 'maxclients', '10000');
  }
  await waitForStart(svc, 30_000);
  assert.equal(lines(svc.output(), 'Redis reachable again').length, 1);
});
