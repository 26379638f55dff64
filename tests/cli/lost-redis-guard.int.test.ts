// A one-shot command whose Redis goes away after it connected stops, saying so, instead of
// waiting forever on a connection that retries without end: the guard gives up once Redis has
// answered nothing for its limit (gone, or frozen on an open connection), and not when it comes
// back in time. Real redis-server processes; the CLI's limit is 60 s, the guard's here shorter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { guardLostRedis } from '../../cli/lost-redis-guard.ts';
import { startPrivateRedis } from '../../cli/private-redis.ts';
import { createRedis } from '../../shared/runtime/redis.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a Redis gone past the limit gives up, naming its last error; one back in time does not', async () => {
  const server = await startPrivateRedis();
  const redis = createRedis(server.url, 'deepq:test');
  try {
    await redis.ping();
    const gaveUp: string[] = [];
    const stop = guardLostRedis(redis, 500, (last) => gaveUp.push(last), 50);
    // Dropped and back at once: no give-up.
    redis.disconnect(true);
    await redis.ping();
    await sleep(900);
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

test('a Redis that stops answering on an open connection (frozen) gives up too', async () => {
  const server = await startPrivateRedis();
  const redis = createRedis(server.url, 'deepq:test');
  try {
    await redis.ping();
    const gaveUp: string[] = [];
    const stop = guardLostRedis(redis, 500, (last) => gaveUp.push(last), 50);
    server.proc.kill('SIGSTOP');
    void redis.get('k').catch(() => {});
    await sleep(1500);
    assert.deepEqual(gaveUp, ['no answer for 0.5 s']);
    stop();
  } finally {
    server.proc.kill('SIGCONT');
    redis.disconnect();
    await server.stop().catch(() => {});
  }
});
