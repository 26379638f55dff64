// The Goal page's live feed follows the goal's state, not only its timeline: a move into
// planning (no timeline entry) and a planner's usage reach an open page; a goal whose keys are
// swept while watched ends its stream (the browser's reconnect then gets a 404).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { openEventStream, startUi, type UiProc } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
before(async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  client = new GoalClient(loadConfig(env), createRedis(redis.url, 'deepq:test'));
  ui = await startUi(env);
});
after(async () => client?.close());

test("a move into planning and the planner's tokens reach an open page without a timeline entry", async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal being planned', {}, false);
  const feed = await openEventStream(ui.url, goalId);
  await feed.waitFor(/event: goal\ndata: \{[^\n]*"status":"queued"/, 'the queued goal');
  assert.ok(await client.lifecycle.beginPlanning(goalId));
  await feed.waitFor(/event: goal\ndata: \{[^\n]*"status":"planning"/, 'the goal in planning');
  const usage = { input: 12_000, output: 3_000, cache_read: 0, cache_write: 0 };
  assert.ok(await client.goals.addUsage(goalId, 'planner', 'scripted-high', usage));
  await feed.waitFor(/event: goal\ndata: \{[^\n]*15,000/, "the planner's 15,000 tokens");
  feed.close();
});

test("a feed that catches up sends the goal's state after the entries it missed, never ahead of them", async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal that ends while no page follows it', {}, false);
  const seen = (await redis.client.xrevrange(client.goals.keys.events(goalId), '+', '-', 'COUNT', 1))[0]![0];
  // While no page follows: more entries, then the end (a page took the state first and stopped).
  const event = { type: 'tool_called', at: Date.now(), step: 1, index: 0, role: 'critic', tool: 'read_file' };
  await redis.client.xadd(client.goals.keys.events(goalId), '*', 'e', JSON.stringify({ ...event, ms: 1, ok: true }));
  await client.cancel(goalId);
  const last = (await redis.client.xrevrange(client.goals.keys.events(goalId), '+', '-', 'COUNT', 1))[0]![0];
  const feed = await openEventStream(ui.url, goalId, seen);
  await feed.waitFor(/event: goal\ndata: \{[^\n]*"status":"cancelled"/, 'the cancelled goal');
  const text = feed.text();
  assert.ok(text.includes(`id: ${last}`), `the last entry was sent: ${last}\n${text}`);
  assert.ok(text.indexOf(`id: ${last}`) < text.indexOf('event: goal'), `the state went ahead of the entries:\n${text}`);
  feed.close();
});

test('a goal swept while watched ends its stream', async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal swept while watched', {}, false);
  const feed = await openEventStream(ui.url, goalId);
  await feed.waitFor(/event: goal/, 'the goal');
  await client.redis.del(client.goals.keys.goal(goalId), client.goals.keys.events(goalId));
  await feed.ended('the swept goal');
  assert.match(feed.text(), /event: gone\n/, 'the page is told the goal is gone');
  const again = await fetch(`${ui.url}/goals/${goalId}/events`);
  assert.equal(again.status, 404);
});

test("a busy goal's feed sends its snapshot at most once a second, and one after its last entries", async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A busy goal', {}, false);
  const feed = await openEventStream(ui.url, goalId);
  await feed.waitFor(/event: goal/, 'the first snapshot');
  const started = Date.now();
  let last = '';
  for (let i = 0; i < 60; i++) {
    const event = { type: 'tool_called', at: Date.now(), step: 1, index: 0, role: 'critic', tool: 'read_file' };
    last = (await redis.client.xadd(
      client.goals.keys.events(goalId),
      '*',
      'e',
      JSON.stringify({ ...event, ms: i, ok: true }),
    ))!;
    await new Promise((r) => setTimeout(r, 25));
  }
  await feed.waitFor(new RegExp(`id: ${last}\\n[^]*event: goal`), 'a snapshot after the last entry');
  const seconds = (Date.now() - started) / 1000;
  const snapshots = feed.text().split('event: goal').length - 1;
  // The first, then one a second at most while entries came, and the one owed after them.
  assert.ok(snapshots <= Math.ceil(seconds) + 2, `${snapshots} snapshots in ${seconds.toFixed(1)} s`);
  feed.close();
});

test("a cycle's instructions go out once per feed, not with each tool call; a new feed sends them again", async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal with a long instruction', {}, false);
  const role = 'research-specialist';
  const instruction = `Read everything (MARKER) ${'and more '.repeat(2000)}`;
  const plan = { subtasks: [{ role, instruction, expected_artifact: 'a.md', read_files: [] }] };
  const feed = await openEventStream(ui.url, goalId);
  await feed.waitFor(/event: goal/, 'the goal');
  assert.ok(await client.lifecycle.beginPlanning(goalId));
  await client.lifecycle.dispatch(goalId, 1, plan, {});
  for (let i = 0; i < 3; i++) {
    const call = { step: 1, index: 0, role, threadId: 'th', tool: 'read_file', ms: i, ok: true };
    await client.goals.appendEvent(goalId, { type: 'tool_called', ...call });
  }
  await feed.waitFor(/"toolCalls":3/, 'the third tool call');
  const timeline = feed
    .text()
    .split('\n')
    .filter((l) => l.startsWith('data: {"line"'));
  const withPlan = timeline.filter((l) => l.includes('MARKER'));
  assert.equal(withPlan.length, 1, 'the instruction sent once');
  const toolCalls = timeline.filter((l) => l.includes('read_file'));
  assert.equal(toolCalls.length, 3);
  assert.ok(
    toolCalls.every((l) => l.includes('"planSent":true') && !l.includes('and more')),
    'the tool calls without it',
  );
  feed.close();
  // Another feed (a reload, a reconnect) sends it again with its first update of the cycle.
  const again = await openEventStream(ui.url, goalId);
  await again.waitFor(/MARKER/, 'the instruction in a new feed');
  again.close();
});
