// A model call's usage and its token reservation survive a lost reply: the client talks to Redis
// through a fault proxy that runs the script, drops its reply and cuts the connection; ioredis
// then sends the same script again. The usage is booked once, its tool_called event appended
// once, and the reservation held once (a second share would end a goal that spent nothing).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ModelRequest } from '../../shared/agent/providers/types.ts';
import { loadTranscript, transcriptWrite } from '../../shared/agent/transcripts.ts';
import { goalCallBudget } from '../../shared/goal/budgets.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { totalTokens, usageArgs } from '../../shared/goal/store.ts';
import { type FaultProxy, type ProxiedCommand, startFaultProxy } from '../../testing/fault-proxy.ts';
import { useRedis } from '../../testing/redis.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let proxy: FaultProxy;
let t: VfsTestRuntime;
before(async () => {
  await redis.ready;
  proxy = await startFaultProxy({ host: '127.0.0.1', port: redis.server.port });
  t = vfsRuntime(proxy.url);
});
after(async () => {
  await t?.close();
  await proxy?.close();
});

/** A script call with `keys` keys, the last one ending in `lastKey`. */
const script = (keys: number, lastKey: string) => (c: ProxiedCommand) =>
  (c.name === 'EVALSHA' || c.name === 'EVAL') && c.args[1] === String(keys) && !!c.args[1 + keys]?.endsWith(lastKey);
const USAGE = { input: 1200, output: 300, cache_read: 0, cache_write: 0 };

test('a usage record re-sent after a lost reply is booked once', async () => {
  const goalId = await t.newGoal();
  const dropped = proxy.dropReplyOnce(script(2, ':reservations'));
  assert.equal(await t.rt.goals.recordUsage(goalId, usageArgs('critic', 'test-model', USAGE)), true);
  await dropped;
  assert.equal(totalTokens((await t.rt.goals.get(goalId))!.tokens), 1500);
  // A second record of the same size is a new record: booked.
  await t.rt.goals.recordUsage(goalId, usageArgs('critic', 'test-model', USAGE));
  assert.equal(totalTokens((await t.rt.goals.get(goalId))!.tokens), 3000);
});

test("a tool_called event with its call's usage, re-sent: one event, the usage booked once", async () => {
  const goalId = await t.newGoal();
  const event = { type: 'tool_called' as const, step: 1, index: 0, role: 'critic', threadId: 't', tool: 'read_file' };
  // toolCalled.lua's keys: the goal, its reservations, events and checkpoints, and a job's lock
  // (the goal's hash again, for a call that stores no progress).
  const dropped = proxy.dropReplyOnce(script(5, goalId));
  await t.rt.goals.toolCalled(goalId, { ...event, ms: 3, ok: true }, usageArgs('critic', 'test-model', USAGE));
  await dropped;
  assert.equal(totalTokens((await t.rt.goals.get(goalId))!.tokens), 1500);
  const calls = (await t.rt.goals.events(goalId)).filter((e) => e.event.type === 'tool_called');
  assert.equal(calls.length, 1);
});

test('a token reservation re-sent after a lost reply holds its share once', async () => {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'a budgeted goal', { maxTokens: 6000 }, false);
  const goal = await t.rt.goals.get(goalId);
  const budget = goalCallBudget(t.rt, goal!);
  const req: ModelRequest = {
    model: 'test-model',
    max_tokens: 4000,
    system: 'You are a test.',
    tools: [],
    messages: [{ role: 'user', content: 'hi' }],
  };
  const dropped = proxy.dropReplyOnce(script(2, ':reservations'));
  const grant = await budget.reserve(req, { role: 'critic' } as never);
  await dropped;
  // The first send reserved 4000 + its input; the re-send, seeing its own member, gets that back.
  assert.equal(grant.maxTokens, 4000);
  const members = await redis.client.zrange(t.rt.goals.keys.reservations(goalId), '0', '-1');
  assert.deepEqual(members, [grant.member]);
});

test("a move whose reply is lost for good books its run's last call once; its transcript is stored again", async () => {
  const goalId = await t.newGoal();
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  const threadId = `goal-${goalId}--planner-abcd1234`;
  const w = transcriptWrite(
    t.rt,
    goalId,
    threadId,
    'planner',
    [{ role: 'user', content: 'plan it' }],
    usageArgs('planner', 'test-model', USAGE),
  );
  // The script runs in Redis, then the client gets an error, not its reply (one ioredis cannot
  // re-send): the lifecycle stores the run's transcript on its own.
  const redis = t.rt.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const move = redis.deepq_goalTransition!;
  redis.deepq_goalTransition = async function (this: unknown, ...args: unknown[]) {
    redis.deepq_goalTransition = move;
    await move.apply(this, args);
    throw new Error('Connection is closed.');
  };
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  await assert.rejects(t.rt.lifecycle.dispatch(goalId, 1, plan, { threadId, transcript: w }), /Connection is closed/);
  const g = (await t.rt.goals.get(goalId))!;
  assert.equal(g.status, 'running', 'the move was made');
  assert.equal(totalTokens(g.tokens), 1500, 'the call was booked twice');
  assert.ok(await loadTranscript(t.rt, threadId), 'the transcript was stored');
});
