// A subtask that fails for good after spending tokens says how many in its subtask_failed
// event: the tokens of the failed run ride from the job to the final-failure hook with the error,
// which records it once, before the cycle's reflection.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startFleet } from '../../testing/fleet.ts';
import {
  apiError,
  defaultHandler,
  roleOf,
  startMessagesApiServer,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test("a run that fails after a model call reports that call's tokens in subtask_failed", async () => {
  await redis.ready;
  let researchCalls = 0;
  // The research subtask's first call lists files (155 tokens, cache reads and writes included, as
  // the token cap and the goal's totals count them); its second is refused for good.
  const api = await startMessagesApiServer({
    handler: (body, i, req) => {
      if (roleOf(body) !== 'research') return defaultHandler(body, i, req);
      if (researchCalls++ === 0)
        return {
          ...toolUse('list_files', {}),
          usage: { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 30, cache_creation_input_tokens: 5 },
        };
      return apiError(400, 'this request is malformed');
    },
  });
  const fleet = await startFleet(redis.url, api.env({ DEEPQ_SUBTASK_ATTEMPTS: '1', DEEPQ_MAX_DEPTH: '1' }));
  try {
    const goalId = await fleet.client.enqueue({ goal: 'A research that fails midway' });
    await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
    const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
    const failed = events.find((e) => e.type === 'subtask_failed' && e.role === 'research-specialist');
    assert.ok(failed?.type === 'subtask_failed', JSON.stringify(events.map((e) => e.type)));
    assert.match(String(failed.reason), /malformed/);
    assert.equal(failed.tokens, 155, 'the failed run spent its first call');
    assert.equal(researchCalls, 2);
    // Recorded once, and before the move to failed released the reflection: it comes first.
    const research = events.filter((e) => e.type === 'subtask_failed' && e.role === 'research-specialist');
    assert.equal(research.length, 1, 'the failure was recorded twice');
    assert.ok(events.indexOf(failed) < events.findIndex((e) => e.type === 'reflected'), 'reflected came first');
  } finally {
    await fleet.stop();
    await api.close();
  }
});
