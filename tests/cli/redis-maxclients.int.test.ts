// A Redis at its maxclients closes every new connection (its error reply never reaches the
// client, which only sees its writes fail): the CLI says what that may mean, not just "EPIPE".

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('a Redis at its maxclients: the CLI names the limit as the likely cause', { timeout: 60_000 }, async () => {
  await redis.ready;
  // The test's own connection is the one client allowed.
  await redis.client.config('SET', 'maxclients', '1');
  try {
    const r = await runCli(['status', 'abcdefabcdef'], testEnv(redis.url, { LOG_LEVEL: 'silent' }), 40_000);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /^deepq: error: cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+: .*(EPIPE|ECONNRESET)/m,
    );
    assert.match(r.stderr, /is it at its maxclients limit/);
  } finally {
    await redis.client.config('SET', 'maxclients', '10000');
  }
});
