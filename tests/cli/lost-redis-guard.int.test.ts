// A one-shot command whose Redis goes away after it connected stops, saying so, instead of
// waiting forever on a connection that retries without end: the guard gives up once the
// connection has been down its limit on end, and not when Redis comes back in time. Real
// redis-server processes; the CLI's limit is 60 s, so the guard is tested with a short one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { guardLostRedis } from '../../cli/lost-redis-guard.ts';
import { startPrivateRedis } from '../../cli/private-redis.ts';
import { createRedis } from '../../shared/runtime/redis.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a connection down past the limit gives up, naming its last error; one back in time does not', async () => {
  const server = await startPrivateRedis();
  const redis = createRedis(server.url, 'deepq:test');
  try {
    await redis.ping();
    const gaveUp: string[] = [];
    const stop = guardLostRedis(redis, 400, (last) => gaveUp.push(last));
    // Dropped and back at once: no give-up.
    redis.disconnect(true);
    await redis.ping();
    await sleep(700);
    assert.deepEqual(gaveUp, []);
    // The server gone: a command waits (retried without end) until the guard gives up.
    await server.stop();
    void redis.get('k').catch(() => {});
    await sleep(1500);
    assert.equal(gaveUp.length, 1, 'gave up once');
    assert.match(gaveUp[0]!, /ECONNREFUSED|Connection is closed/);
    stop();
  } finally {
    redis.disconnect();
    await server.stop().catch(() => {});
  }
});
