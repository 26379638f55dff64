// A bad config stops a service process at start: exit 78, the field named, no stack trace.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../../testing/fleet.ts';

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
