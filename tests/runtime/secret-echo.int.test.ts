// A provider whose error bodies echo the API key (some gateways do): the key must not reach
// BullMQ's stored failure (failedReason, stack trace), the goal's outcomes and progress, the
// next planner's prompt, transcripts, the timeline or the logs. Real SDK, local Messages API,
// a key no pattern knows (only the exact-match scrub can find it).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  apiError,
  defaultHandler,
  type MessagesApiServer,
  roleOf,
  startMessagesApiServer,
} from '../../testing/messages-api-server.ts';
import { everyValue, useRedis } from '../../testing/redis.ts';

const KEY = 'gw-Key-ECHOED-0123456789abcdef';
const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({
    handler: (body, i, req) =>
      roleOf(body) === 'research'
        ? apiError(401, `invalid x-api-key: ${req.apiKey}`)
        : roleOf(body) === 'code'
          ? apiError(500, `upstream refused key ${req.apiKey}`)
          : defaultHandler(body, i, req),
  });
  const env = anthropicEnv(server, { ANTHROPIC_API_KEY: KEY, DEEPQ_SUBTASK_ATTEMPTS: '1', DEEPQ_MAX_DEPTH: '2' });
  fleet = await startFleet(redis.url, env);
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

test('a key echoed in provider errors is scrubbed from stored failures, outcomes, prompts and logs', {
  timeout: 90_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Echo the key' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.ok(['done', 'failed', 'awaiting_human'].includes(g.status), g.status);
  // The echo happened: the errors carried the key into deepq.
  const echoed = server.requests.filter((r) => r.response?.kind === 'raw');
  assert.ok(echoed.length >= 2, 'the provider never answered with the key');
  const failed = await fleet.client.goals.events(goalId);
  assert.ok(
    failed.some((e) => e.event.type === 'subtask_failed'),
    'no subtask failed',
  );

  const stored = await everyValue(redis.client);
  assert.match(stored, /invalid x-api-key: \*\*\*/, "the failures' text is stored, scrubbed");
  assert.ok(!stored.includes('ECHOED'), 'the key is stored in Redis');
  const sent = server.requests.map((r) => r.rawBody).join('\n');
  assert.ok(!sent.includes('ECHOED'), 'the key was sent to a model in a prompt');
  const logs = fleet.procs.map((p) => p.output()).join('\n');
  assert.ok(!logs.includes('ECHOED'), 'the key is in a log');
});
