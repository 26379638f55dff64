// The goal's hot-path writes stay bounded and correct while doing less: a move renews the keys'
// backstop TTL only once less than half of it is left (at the end, only when less is left than the goal
// is kept after it; and after a pause), usage is one script
// whose per-kind totals are read back as sums, and nothing is written for a goal that is gone.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { contractFor } from '../../shared/agent/output-contracts.ts';
import { runForGoal } from '../../shared/agent/run-for-goal.ts';
import { loadTranscript, transcriptWrite } from '../../shared/agent/transcripts.ts';
import { goalCallBudget, goalUsage } from '../../shared/goal/budgets.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { GoalLifecycle } from '../../shared/goal/lifecycle.ts';
import { GoalStore, totalTokens, usageArgs } from '../../shared/goal/store.ts';
import { ctxFor } from '../../testing/agent-harness.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const usage = (input: number, output: number) => ({ input, output, cache_read: 0, cache_write: 0 });

/** The four keys a move renews (goal, events, files, content), each made to exist by a write. */
async function renewedKeys(goalId: string): Promise<string[]> {
  const k = t.rt.goals.keys;
  await t.rt.vfs.write(goalId, 'a.md', 'x', { status: 'done', step: 1, writer: 'w' });
  return [k.goal(goalId), k.events(goalId), k.files(goalId), k.content(goalId)];
}

test('a move renews the backstop TTL of every goal key once less than half of it is left, not before', async () => {
  const goalId = await t.newGoal();
  const full = t.rt.cfg.goalKeyTtlSeconds;
  const k = t.rt.goals.keys;
  const keys = await renewedKeys(goalId);
  // More than half is left (ttlAt, when the keys expire, set at creation): a move leaves the TTLs alone.
  for (const key of keys) await redis.client.expire(key, Math.ceil(full * 0.75));
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  for (const key of keys) assert.ok((await redis.client.ttl(key)) <= Math.ceil(full * 0.75), `${key} renewed early`);
  // Less than half is left: the next move renews all four.
  for (const key of keys) await redis.client.expire(key, 100);
  await redis.client.hset(k.goal(goalId), 'ttlAt', Date.now() + full * 400);
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  for (const key of keys) assert.ok((await redis.client.ttl(key)) > full - 60, `${key} not renewed`);
  // A goal stored before ttlAt existed is renewed on its first move.
  for (const key of keys) await redis.client.expire(key, 100);
  await redis.client.hdel(k.goal(goalId), 'ttlAt');
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  for (const key of keys) assert.ok((await redis.client.ttl(key)) > full - 60, `${key} not renewed without ttlAt`);
});

test("a producer's shorter TTL is renewed by the first move of a service with a longer one", async () => {
  const full = t.rt.cfg.goalKeyTtlSeconds;
  const k = t.rt.goals.keys;
  // `deepq enqueue` run with DEEPQ_GOAL_KEY_TTL_SECONDS=12 against services at the default.
  const producer = new GoalStore(t.rt.redis, t.rt.cfg.prefix, { keyTtlSeconds: 12, eventsMaxLen: 100 });
  const goalId = newGoalId();
  assert.ok(await producer.create(goalId, 'a goal', {}, false));
  assert.ok((await redis.client.ttl(k.goal(goalId))) <= 12);
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  for (const key of [k.goal(goalId), k.events(goalId)])
    assert.ok((await redis.client.ttl(key)) > full - 60, `${key} left to expire at the producer's TTL`);
  // The renewal is recorded as when the keys now expire: the next move has nothing to renew.
  const ttlAt = Number(await redis.client.hget(k.goal(goalId), 'ttlAt'));
  assert.ok(Math.abs(ttlAt - (Date.now() + full * 1000)) < 60_000, `ttlAt ${ttlAt}`);
});

test('a goal awaiting a human keeps its keys; the move that takes it on sets the backstop again', async () => {
  const goalId = await t.newGoal();
  const full = t.rt.cfg.goalKeyTtlSeconds;
  const keys = await renewedKeys(goalId);
  const hit = { kind: 'tokens' as const, reason: 'token budget exceeded' };
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, hit, 1));
  for (const key of keys) assert.equal(await redis.client.ttl(key), -1, `${key} still expires while paused`);
  assert.ok(await t.rt.lifecycle.resume(goalId, 1, 'replan', 1));
  for (const key of keys)
    assert.ok((await redis.client.ttl(key)) > full - 60, `${key} without a backstop after resume`);
});

test('the end of a goal renews the backstop only when less is left than the goal is kept after it', async () => {
  const full = t.rt.cfg.goalKeyTtlSeconds;
  const k = t.rt.goals.keys;
  const ending = async (keptAfterEndSeconds: number) => {
    const goalId = await t.newGoal();
    await renewedKeys(goalId);
    // A third of the TTL has run: no move before the end would renew it.
    await redis.client.hset(k.goal(goalId), 'ttlAt', Date.now() + full * 667);
    await redis.client.expire(k.goal(goalId), Math.ceil(full * 0.67));
    const lc = new GoalLifecycle(t.rt.redis, k, { keyTtlSeconds: full, eventsMaxLen: 100, keptAfterEndSeconds });
    assert.ok(await lc.cancel(goalId, 0));
    return redis.client.ttl(k.goal(goalId));
  };
  // The default keeps a finished goal a day; two thirds of a week are left: nothing to renew.
  assert.ok((await ending(t.rt.cfg.retentionSeconds)) <= Math.ceil(full * 0.67), 'renewed at the end for nothing');
  // Kept longer after its end than is left: the end sets the whole TTL again.
  assert.ok((await ending(Math.ceil(full * 0.8))) > full - 60, 'not renewed though the goal must outlive the TTL');
  // Kept longer than the TTL itself (a retention above it): the keys last the retention.
  assert.ok((await ending(full * 2)) > full * 2 - 60, 'the keys would expire before the sweep removes the goal');
});

test('usage is counted per role and model; the per-kind totals and the budget read their sums', async () => {
  const goalId = await t.newGoal();
  assert.equal(await t.rt.goals.addUsage(goalId, 'planner', 'm1', usage(100, 20)), true);
  assert.equal(await t.rt.goals.addUsage(goalId, 'critic', 'm2', { ...usage(5, 7), cache_read: 40 }), true);
  const g = (await t.rt.goals.get(goalId))!;
  assert.deepEqual(g.tokens, { input: 105, output: 27, cache_read: 40, cache_write: 0 });
  assert.deepEqual(g.usage['planner|m1'], usage(100, 20));
  // A token budget sees all 172 used: 30 left is too few for a call of at least the floor.
  await redis.client.hset(t.rt.goals.keys.goal(goalId), 'budgets', JSON.stringify({ maxTokens: 200 }));
  const budget = goalCallBudget(t.rt, { goalId, budgets: { maxTokens: 200 } });
  const req = { model: 'm', system: '', messages: [], max_tokens: 1000 };
  await assert.rejects(budget.reserve(req, {} as never), /172 tokens used/);
});

/** Calls of each command since the last CONFIG RESETSTAT, those inside scripts included. */
async function commandCalls(): Promise<Record<string, number>> {
  const info = await redis.client.info('commandstats');
  return Object.fromEntries([...info.matchAll(/cmdstat_(\S+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

test("a call's usage is one read and one write of the goal alone, and no command of its own in a move", async () => {
  const goalId = await t.newGoal();
  const flagged = usageArgs('critic', 'm2', { ...usage(5, 7), cache_read: 40 }, undefined, {
    requested: 'alias',
    estimated: true,
  });
  await redis.client.config('RESETSTAT');
  assert.equal(await t.rt.goals.recordUsage(goalId, flagged), true);
  const alone = await commandCalls();
  assert.equal(alone.hincrby, undefined, 'a count per HINCRBY');
  assert.equal(alone.hmget, 1);
  assert.equal(alone.hset, 1, 'the counts and the requested model in one HSET');
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  const threadId = `goal-${goalId}--planner-cc`;
  const messages = [{ role: 'user' as const, content: 'plan it' }];
  const transcript = transcriptWrite(
    t.rt,
    goalId,
    threadId,
    'planner',
    messages,
    usageArgs('planner', 'm', usage(2, 1)),
  );
  await redis.client.config('RESETSTAT');
  assert.ok(await t.rt.lifecycle.dispatch(goalId, 1, plan, { threadId, transcript }));
  const move = await commandCalls();
  assert.equal(move.hincrby, undefined);
  assert.equal(move.hset, 1, 'the usage is set with the move');
  assert.equal(move.hmget, 1, 'the usage is read with the move');
  const g = (await t.rt.goals.get(goalId))!;
  assert.deepEqual(g.tokens, { input: 7, output: 8, cache_read: 40, cache_write: 0 });
  assert.deepEqual(g.usage['planner|m'], usage(2, 1));
});

test('usage for a goal that is gone writes nothing (no orphan hash without a TTL)', async () => {
  const goalId = await t.newGoal();
  await redis.client.del(t.rt.goals.keys.goal(goalId));
  assert.equal(await t.rt.goals.addUsage(goalId, 'planner', 'm1', usage(1, 1)), false);
  assert.equal(await redis.client.exists(t.rt.goals.keys.goal(goalId)), 0);
  assert.equal(await t.rt.goals.addUsage(goalId, 'planner', 'm1', usage(0, 0)), false, 'a call that used nothing');
  assert.equal(await redis.client.exists(t.rt.goals.keys.goal(goalId)), 0);
  // A goal's first usage (its total starts at this call's) is counted like any other.
  const fresh = await t.newGoal();
  assert.equal(await t.rt.goals.addUsage(fresh, 'planner', 'm1', usage(3, 4)), true);
  assert.equal((await t.rt.goals.get(fresh))!.tokens.output, 4);
});

test('without a token budget a call reserves nothing in Redis; its time budget still stops it', async () => {
  const goalId = await t.newGoal();
  const req = { model: 'm', system: '', messages: [], max_tokens: 1000 };
  const free = goalCallBudget(t.rt, { goalId, budgets: {}, createdAt: Date.now() });
  assert.deepEqual(await free.reserve(req, {} as never), { maxTokens: 1000, member: '' });
  assert.equal(await redis.client.exists(t.rt.goals.keys.reservations(goalId)), 0);
  const createdAt = Date.now() - 5000;
  const goal = t.rt.goals.keys.goal(goalId);
  await redis.client.hset(goal, 'budgets', JSON.stringify({ maxSeconds: 1 }), 'createdAt', createdAt);
  const late = goalCallBudget(t.rt, { goalId, budgets: { maxSeconds: 1 }, createdAt });
  await assert.rejects(late.reserve(req, {} as never), /time budget exceeded: 5\.\d s elapsed \(max 1 s\)/);
});

test('a deadline raised after a run read it (a resume while the run went on) lets its next call go', async () => {
  const goalId = await t.newGoal();
  const createdAt = Date.now() - 5000;
  const goal = t.rt.goals.keys.goal(goalId);
  await redis.client.hset(goal, 'budgets', JSON.stringify({ maxSeconds: 3 }), 'createdAt', createdAt);
  const run = goalCallBudget(t.rt, { goalId, budgets: { maxSeconds: 3 }, createdAt });
  const req = { model: 'm', system: '', messages: [], max_tokens: 1000 };
  await assert.rejects(run.reserve(req, {} as never), /max 3 s/);
  await redis.client.hset(goal, 'budgets', JSON.stringify({ maxSeconds: 60 }));
  assert.deepEqual(await run.reserve(req, {} as never), { maxTokens: 1000, member: '' });
  await redis.client.hset(goal, 'budgets', JSON.stringify({ maxSeconds: 4 }));
  await assert.rejects(run.reserve(req, {} as never), /max 4 s/, 'the stored deadline, not the one read at the start');
});

/** A research subtask through runForGoal on the scripted model: one call, one transcript. */
async function researchRun(goalId: string) {
  const spec = t.rt.cfg.roles.find((r) => r.name === 'research-specialist')!;
  const goal = (await t.rt.goals.get(goalId))!;
  const threadId = `goal-${goalId}--research-specialist-0000abcd`;
  return runForGoal(t.rt, {
    spec,
    goal,
    task: `Goal: ${goal.goal}\nInstruction: research the topic`,
    contract: contractFor(spec.contract),
    ctx: { ...ctxFor(spec.name, { goalId }), threadId, step: 1 },
    log: pino({ level: 'silent' }),
  });
}

/** Scripts run so far (EVALSHA, or EVAL the first time a script meets a connection). */
async function scriptCalls(): Promise<number> {
  const info = await redis.client.info('commandstats');
  return [...info.matchAll(/cmdstat_eval(?:sha)?:calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

test("without a token budget a run's last call is booked with its transcript, in one script", async () => {
  const goalId = await t.newGoal('a goal researched once');
  const before = await scriptCalls();
  const out = await researchRun(goalId);
  assert.equal(out.kind, 'ok', JSON.stringify(out));
  assert.equal((await scriptCalls()) - before, 1, 'the usage and the transcript took more than one script');
  const g = (await t.rt.goals.get(goalId))!;
  assert.ok(g.tokens.input > 0 && g.tokens.output > 0, JSON.stringify(g.tokens));
  assert.deepEqual(Object.keys(g.usage), ['research-specialist|scripted-low']);
  assert.ok(await loadTranscript(t.rt, `goal-${goalId}--research-specialist-0000abcd`));
});

test('with a token budget each call is booked at once (its reservation ends with it)', async () => {
  const goalId = await t.newGoal('a goal with a token budget');
  await redis.client.hset(t.rt.goals.keys.goal(goalId), 'budgets', JSON.stringify({ maxTokens: 100_000 }));
  const before = await scriptCalls();
  const out = await researchRun(goalId);
  assert.equal(out.kind, 'ok', JSON.stringify(out));
  // Reserve, book, transcript.
  assert.equal((await scriptCalls()) - before, 3);
  assert.equal(await redis.client.zcard(t.rt.goals.keys.reservations(goalId)), 0, 'a reservation was left behind');
  assert.ok(totalTokens((await t.rt.goals.get(goalId))!.tokens) > 0);
});

test("without a token budget a call's record waits for the next one; flush books the last", async () => {
  const goalId = await t.newGoal('a goal whose run stops');
  const usageOf = async () => (await t.rt.goals.get(goalId))!.usage['critic|m'];
  const book = goalUsage(t.rt, { goalId, budgets: {} });
  const ctx = { ...ctxFor('critic', { goalId }), tier: 'LOW', contract: 'critique' } as never;
  await book.sink(ctx, 'm', usage(10, 1));
  assert.equal(await usageOf(), undefined, 'booked before the next call');
  await book.sink(ctx, 'm', usage(20, 2));
  assert.deepEqual(await usageOf(), usage(10, 1), 'the first call is booked when the second is due');
  await book.flush(); // as when the run stops without a transcript (a pause, a budget, an error)
  assert.deepEqual(await usageOf(), usage(30, 3));
  await book.flush();
  assert.deepEqual(await usageOf(), usage(30, 3), 'booked twice');
  assert.equal(book.takePending(), undefined);
});

test("a tool call's event carries the waiting usage record; a failed write gives it back", async () => {
  const goalId = await t.newGoal('a goal whose run calls tools');
  const usageOf = async () => (await t.rt.goals.get(goalId))!.usage['critic|m'];
  const book = goalUsage(t.rt, { goalId, budgets: {} });
  const ctx = { ...ctxFor('critic', { goalId }), tier: 'LOW', contract: 'critique' } as never;
  const event = (tool: string) => ({
    type: 'tool_called' as const,
    step: 1,
    role: 'critic',
    threadId: 'th',
    tool,
    ms: 1,
    ok: true,
  });
  const carry = (tool: string) => book.carry((args) => t.rt.goals.toolCalled(goalId, event(tool), args));
  await book.sink(ctx, 'm', usage(10, 1));
  const before = await scriptCalls();
  await carry('grep');
  assert.equal((await scriptCalls()) - before, 1, 'the event and the record took more than one script');
  assert.deepEqual(await usageOf(), usage(10, 1));
  // The turn's next tool call has no record to carry (a plain XADD); the next call's flush has none to book.
  await carry('list_files');
  await book.flush();
  assert.equal((await scriptCalls()) - before, 1);
  const tools = (await t.rt.goals.events(goalId)).filter((e) => e.event.type === 'tool_called');
  assert.deepEqual(
    tools.map((e) => (e.event as { tool: string }).tool),
    ['grep', 'list_files'],
  );
  // A carrying write that fails hands its record back: the next flush books it.
  await book.sink(ctx, 'm', usage(20, 2));
  await assert.rejects(
    book.carry(() => Promise.reject(new Error('connection lost'))),
    /connection lost/,
  );
  await book.flush();
  assert.deepEqual(await usageOf(), usage(30, 3));
});

test('dispatch stores the plan with the move, once; a terminal move reports the cycles it ended at', async () => {
  const goalId = await t.newGoal();
  const ended: [string, number][] = [];
  const lc = new GoalLifecycle(t.rt.redis, t.rt.goals.keys, {
    keyTtlSeconds: 3600,
    eventsMaxLen: 100,
    onTerminal: (status, cycles) => ended.push([status, cycles]),
  });
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  assert.ok(await lc.beginPlanning(goalId));
  assert.ok(await lc.dispatch(goalId, 2, plan, { threadId: 'goal-x--planner-p2' }));
  // A concurrent delivery with its own plan is refused, and the stored plan stays.
  const other = { subtasks: [{ ...plan.subtasks[0]!, expected_artifact: 'b.md' }] };
  assert.equal(await lc.dispatch(goalId, 2, other, { threadId: 'goal-x--planner-q2' }), false);
  const g = (await t.rt.goals.get(goalId))!;
  assert.deepEqual([g.status, g.step, g.planStep, g.plan?.subtasks[0]?.expected_artifact], ['running', 2, 2, 'a.md']);
  const types = (await t.rt.goals.events(goalId)).map((e) => e.event.type);
  assert.deepEqual(types.slice(-2), ['planned', 'dispatched']);
  assert.equal(types.filter((x) => x === 'planned').length, 1);
  assert.ok(await lc.cancel(goalId, 2));
  assert.deepEqual(ended, [['cancelled', 2]]);
});

test("a run's transcript lands with the move it decided, or on its own when the move is refused", async () => {
  const goalId = await t.newGoal();
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  const messages = [{ role: 'user' as const, content: 'plan it' }];
  const run = (id: string) =>
    transcriptWrite(
      t.rt,
      goalId,
      `goal-${goalId}--planner-${id}`,
      'planner',
      messages,
      usageArgs('planner', 'm', usage(7, 3)),
    );
  assert.ok(await t.rt.lifecycle.beginPlanning(goalId));
  assert.ok(
    await t.rt.lifecycle.dispatch(goalId, 1, plan, { threadId: `goal-${goalId}--planner-aa`, transcript: run('aa') }),
  );
  // A concurrent delivery's move is refused: its transcript (and usage) is kept all the same.
  assert.equal(await t.rt.lifecycle.dispatch(goalId, 1, plan, { transcript: run('bb') }), false);
  for (const id of ['aa', 'bb']) {
    assert.deepEqual((await loadTranscript(t.rt, `goal-${goalId}--planner-${id}`))?.messages, messages, id);
  }
  assert.equal(totalTokens((await t.rt.goals.get(goalId))!.tokens), 20);
});

test('the moves into planning and reflecting bring the files index with them (one round trip)', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'notes.md', 'n', { status: 'done', step: 1, writer: 'w' });
  const begun = await t.rt.lifecycle.beginPlanning(goalId);
  assert.ok(begun?.files, 'no files with the move');
  const fromMove = await t.rt.vfs.index(goalId, begun.files);
  assert.deepEqual(fromMove, await t.rt.vfs.index(goalId));
  assert.deepEqual(
    fromMove.map((e) => [e.name, e.status]),
    [['notes.md', 'done']],
  );
  // A refused move brings nothing.
  assert.equal(await t.rt.lifecycle.beginReflecting(goalId), null);
});

test("a subtask's read of its goal: status, text, budgets, age and pause, the same as the whole record's", async () => {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'brief goal', { maxTokens: 900, onBudget: 'pause' }, false);
  await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: 'r' }, 1);
  const full = (await t.rt.goals.get(goalId))!;
  const brief = (await t.rt.goals.getBrief(goalId))!;
  const { goal, status, budgets, createdAt, pausedFor } = full;
  assert.deepEqual(brief, { goalId, goal, status, budgets, createdAt, pausedFor });
  assert.deepEqual([brief.status, brief.pausedFor, brief.budgets.maxTokens], ['awaiting_human', 'budget', 900]);
  assert.equal(await t.rt.goals.getBrief(newGoalId()), null);
});

test('an artifact write sets the backstop only on the keys it makes', async () => {
  const goalId = await t.newGoal();
  const full = t.rt.cfg.goalKeyTtlSeconds;
  const k = t.rt.goals.keys;
  await t.rt.vfs.write(goalId, 'a.md', 'x', { status: 'active', step: 1, writer: 'w1' });
  for (const key of [k.files(goalId), k.content(goalId)]) assert.ok((await redis.client.ttl(key)) > full - 60, key);
  await redis.client.expire(k.files(goalId), 100);
  await redis.client.del(k.content(goalId));
  await t.rt.vfs.write(goalId, 'b.md', 'y', { status: 'active', step: 1, writer: 'w2' });
  assert.ok((await redis.client.ttl(k.files(goalId))) <= 100, 'a write renewed the files hash (the moves do)');
  assert.ok((await redis.client.ttl(k.content(goalId))) > full - 60, 'a content hash made beside older files');
});
