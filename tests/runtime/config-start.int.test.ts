// A bad config stops a service process at start: exit 78, the field named, no stack trace.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { freePort } from '../../cli/private-redis.ts';
import { runCli } from '../../testing/fleet.ts';
import { tempDir } from '../../testing/temp-dir.ts';

test('a bad config stops a service process at start with the field named and no stack trace', async () => {
  const r = await runCli(['planner'], { PATH: process.env.PATH, DEEPQ_MAX_DEPTH: '-2' });
  assert.equal(r.code, 78);
  assert.match(r.stderr, /deepq: error: invalid config: maxDepth/);
  assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
});

test('DEEPQ_MODEL_PROVIDER=anthropic without a key stops a service at start, naming the variable', async () => {
  const r = await runCli(['planner'], { PATH: process.env.PATH, DEEPQ_MODEL_PROVIDER: 'anthropic' });
  assert.equal(r.code, 78);
  assert.match(r.stderr, /deepq: error: invalid config: anthropicApiKey \(ANTHROPIC_API_KEY\) is required/);
  assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
});

test('a worker whose DEEPQ_BLOB_DIR cannot be a folder stops at start (78), not at its first spill', async () => {
  const file = join(tempDir('deepq-blob-'), 'a-file');
  writeFileSync(file, 'not a directory');
  const env = { PATH: process.env.PATH, REDIS_URL: `redis://127.0.0.1:${await freePort()}`, DEEPQ_BLOB_DIR: file };
  const r = await runCli(['worker', '--role', 'critic'], env, 30_000);
  assert.equal(r.code, 78, r.stdout + r.stderr);
  assert.match(r.stderr, new RegExp(`deepq: error: DEEPQ_BLOB_DIR ${file}: a file is in the way of its folder`));
});
