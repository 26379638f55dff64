// `npm run demo` runs one goal end to end with every service as its own process, prints
// the plan, each subtask's outcome and the artifacts, and exits 0.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('the demo ends with a done goal and prints its plan, outcomes and artifacts', async () => {
  await redis.ready;
  const env = {
    PATH: process.env.PATH,
    REDIS_URL: redis.url,
    DEEPQ_PREFIX: 'demo',
    DEEPQ_BLOB_DIR: mkdtempSync(join(tmpdir(), 'demo-')),
  };
  const r = await runCli(['demo'], env, 120_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /no ANTHROPIC_API_KEY: using the offline scripted model/);
  assert.match(r.stdout, /cycle 1 planned 2 subtask\(s\)/);
  assert.match(r.stdout, /cycle 1 \[0\] research-specialist finished research\.md/);
  assert.match(r.stdout, /cycle 2 \[0\] critic finished critique\.json/);
  assert.match(r.stdout, /status: done/);
  for (const name of ['research.md', 'solution.py', 'critique.json'])
    assert.match(r.stdout, new RegExp(`=== ${name.replace('.', '\\.')} \\[done`));
  // The demo's services are gone: nothing is left consuming the queues.
  const workers = await redis.client.client('LIST');
  assert.doesNotMatch(String(workers), /name=deepq:(planner|reflector|worker)/);
});

test('with no Redis to use, the demo starts a private redis-server and removes it afterwards', async () => {
  const { freePort, portAnswers } = await import('../../cli/private-redis.ts');
  const nothing = await freePort();
  const env = {
    PATH: process.env.PATH,
    DEEPQ_DEMO_REDIS_PORT: String(nothing),
    DEEPQ_PREFIX: 'demo2',
    DEEPQ_BLOB_DIR: mkdtempSync(join(tmpdir(), 'demo-')),
  };
  const r = await runCli(['demo'], env, 120_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const port = Number(/started a private redis-server on port (\d+)/.exec(r.stdout)?.[1]);
  assert.ok(port > 0, r.stdout);
  assert.match(r.stdout, /status: done/);
  assert.equal(await portAnswers(port), false, 'the private redis-server is still running');
});

test('with no Redis and no redis-server on PATH, the demo says how to get one and exits 1', async () => {
  const { freePort } = await import('../../cli/private-redis.ts');
  const env = { PATH: '/nonexistent', DEEPQ_DEMO_REDIS_PORT: String(await freePort()) };
  const r = await runCli(['demo'], env, 60_000);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /no Redis answers on 127\.0\.0\.1:\d+ and no redis-server is on PATH/);
  assert.match(r.stdout, /apt-get install -y redis-server/);
});
