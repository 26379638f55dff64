// A subtask whose artifact write is refused for a reason another attempt would meet again (the
// goal already holds its maximum of files) fails at once, with the reason: its retries would
// each run the whole agent (every model call and tool) only to be refused the same way.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let fleet: Fleet;
before(async () => {
  await redis.ready;
  // One file per goal: of cycle 1's two subtasks (research.md, solution.py), one is refused.
  fleet = await startFleet(redis.url, {
    DEEPQ_MAX_FILES_PER_GOAL: '1',
    DEEPQ_SUBTASK_ATTEMPTS: '3',
    DEEPQ_MAX_DEPTH: '1',
  });
});
after(async () => fleet?.stop());

test('a write refused for the file count fails its job on the first attempt, naming why', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Two files where one fits' });
  await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  const jobs = await Promise.all(
    (['research-specialist', 'code-writer'] as const).map((role, i) =>
      fleet.client.queues.get(subagentQueueName(role)).getJob(`${goalId}:1:${i}`),
    ),
  );
  const refused = jobs.filter((j) => j?.failedReason);
  assert.equal(refused.length, 1, JSON.stringify(jobs.map((j) => j?.failedReason)));
  assert.equal(refused[0]!.attemptsMade, 1, 'a refusal that would repeat was retried');
  assert.match(refused[0]!.failedReason, /files/);
  const failed = (await fleet.client.goals.events(goalId))
    .map((e) => e.event)
    .filter((e) => e.type === 'subtask_failed');
  assert.equal(failed.length, 1);
  assert.ok(failed[0]?.type === 'subtask_failed' && /files/.test(String(failed[0].reason)), JSON.stringify(failed));
});
