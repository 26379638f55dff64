// Half an emoji in model-made text: V8's JSON.parse error quotes the bad token as one UTF-16
// unit, so a contract failure's reason held a lone surrogate. Stored as `\ud83d` it broke Redis's
// cjson (the cycle's reflection failed for good and the goal with it), and sent back to the model
// in the contract reminder, the API refuses the request (400). Reasons, reminders and events are
// made well-formed before they leave the process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startFleet } from '../../testing/fleet.ts';
import { blockText, defaultHandler, roleOf, startMessagesApiServer, text } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

const plan = {
  subtasks: [
    { role: 'critic', instruction: 'Review the idea', expected_artifact: 'critique.json', read_files: [] },
    { role: 'research-specialist', instruction: 'Research it', expected_artifact: 'notes.md', read_files: [] },
  ],
};

test('a critic answering with an emoji first: its contract retry reaches the model, the goal ends', async () => {
  await redis.ready;
  const api = await startMessagesApiServer({
    handler: (body, i, req) => {
      const role = roleOf(body);
      if (role === 'planner') return text(JSON.stringify(plan));
      // Not JSON, twice: the critic's contract fails for good, naming the bad token.
      if (role === 'critic') return text('🔍 Looks fine overall.');
      if (role === 'reflector') return text(JSON.stringify({ decision: 'end', reason: 'enough' }));
      return defaultHandler(body, i, req);
    },
  });
  const fleet = await startFleet(redis.url, api.env({ DEEPQ_SUBTASK_ATTEMPTS: '1' }));
  try {
    const goalId = await fleet.client.enqueue({ goal: 'Review an idea' });
    const goal = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.equal(goal.status, 'done', `${goal.status}: ${goal.reason}`);
    const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
    const critic = events.find((e) => e.type === 'subtask_failed' && e.role === 'critic');
    assert.ok(critic?.type === 'subtask_failed', JSON.stringify(events.map((e) => e.type)));
    assert.match(String(critic.reason), /not valid JSON/);
    assert.ok(String(critic.reason).isWellFormed(), critic.reason);
    assert.ok(
      events.some((e) => e.type === 'reflected'),
      'the cycle was reflected',
    );
    // The reminder went to the model whole: the API took it (a lone surrogate is a 400 there).
    const criticCalls = api.requests.filter((r) => r.body && roleOf(r.body) === 'critic');
    assert.equal(criticCalls.length, 2, 'one answer and its contract retry');
    const reminder = blockText(criticCalls[1]!.body!.messages.at(-1)!.content);
    assert.match(reminder, /rejected: output is not valid JSON/);
    assert.ok(reminder.isWellFormed(), reminder);
  } finally {
    await fleet.stop();
    await api.close();
  }
});
