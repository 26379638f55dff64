// Approval records in Redis (shared/goal/approvals.ts and its two Lua scripts) on a private
// Redis: a request is all or nothing and idempotent per job; a decision changes only a pending
// record and says what happened otherwise; hostile text survives the scripts' JSON round trip;
// the keys are refreshed while a call waits, swept with their goal, and pending calls of
// goals that ended are released by the reconciler.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GoalReader } from '../../cli/goal-reader.ts';
import { expireApprovals } from '../../services/reflector/approval-timeouts.ts';
import { reconcile } from '../../services/reflector/reconcile.ts';
import { sweep } from '../../services/reflector/sweep.ts';
import {
  type ApprovalRecord,
  INPUT_PREVIEW_CHARS,
  inputPreview,
  isCallId,
  type JobCheckpoint,
  newCallId,
} from '../../shared/goal/approvals.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { cutText } from '../../shared/text.ts';
import { useRedis } from '../../testing/redis.ts';
import { keysOfGoal, useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const HOSTILE = 'rm -rf / \u001b[2J\u001b]0;pwned\u0007 \u009b31m "quoted" \\ back ✓ 😀';

function records(goalId: string, jobId: string, n: number, input: unknown = { name: 'x.py' }): ApprovalRecord[] {
  const now = Date.now();
  return Array.from({ length: n }, () => ({
    callId: newCallId(),
    jobId,
    queue: 'subagent-code-writer',
    role: 'code-writer',
    step: 1,
    index: 0,
    threadId: `goal-${goalId}--code-writer-abcd1234`,
    tool: 'write_file',
    input: inputPreview(input),
    requestedAt: now,
    expiresAt: now + 60_000,
    status: 'pending' as const,
  }));
}

function checkpoint(recs: ApprovalRecord[]): JobCheckpoint {
  const agent = { messages: [], turns: 1, phaseTurns: 1, contractRetry: false, uses: [], awaiting: [] };
  return {
    threadId: recs[0]!.threadId,
    startedAt: 1,
    calls: recs.map((r, index) => ({ index, callId: r.callId })),
    agent,
  };
}

async function approvalEvents(goalId: string): Promise<TimelineEvent[]> {
  return (await t.rt.goals.events(goalId)).map((e) => e.event).filter((e) => e.type.startsWith('approval_'));
}

test('call ids are deepq-made and typeable; input previews are cut and well-formed', () => {
  const ids = new Set(Array.from({ length: 200 }, newCallId));
  assert.equal(ids.size, 200);
  for (const id of ids) assert.ok(isCallId(id), id);
  assert.ok(!isCallId('toolu_01ABC') && !isCallId('ap-ABCDEFGHIJ') && !isCallId('ap-123'));
  const long = inputPreview({ content: '😀'.repeat(400) });
  assert.ok(long.length <= INPUT_PREVIEW_CHARS + 1);
  assert.ok(long.endsWith('…'));
  // A pair of surrogates cut in half becomes U+FFFD, not a lone surrogate.
  assert.equal(cutText('a😀', 2), 'a\uFFFD…');
});

test('a request stores the checkpoint, the records, one event per call and the pending entries, once', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const first = records(goalId, jobId, 2);
  assert.deepEqual(await t.rt.approvals.request(goalId, jobId, checkpoint(first), first), { kind: 'ok' });
  // The same job asks again (a replayed script, a re-delivered job): nothing new.
  const second = records(goalId, jobId, 1);
  const again = await t.rt.approvals.request(goalId, jobId, checkpoint(second), second);
  assert.equal(again.kind, 'waiting');
  assert.deepEqual(again.kind === 'waiting' && again.callIds.sort(), first.map((r) => r.callId).sort());

  assert.deepEqual(
    (await t.rt.approvals.records(goalId)).map((r) => r.callId).sort(),
    first.map((r) => r.callId).sort(),
  );
  assert.deepEqual((await t.rt.approvals.checkpoint(goalId, jobId))?.calls, checkpoint(first).calls);
  const events = await approvalEvents(goalId);
  assert.deepEqual(
    events.map((e) => [e.type, 'callId' in e && e.callId]),
    first.map((r) => ['approval_requested', r.callId]),
  );
  const pending = (await t.rt.approvals.pendingAll()).filter((p) => p.goalId === goalId);
  assert.deepEqual(
    pending.map((p) => p.expiresAt),
    [first[0]!.expiresAt, first[1]!.expiresAt],
  );
});

test('decide changes only a pending record; reports unknown goals, unknown calls, earlier decisions', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2);
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const [a, b] = recs.map((r) => r.callId) as [string, string];

  assert.deepEqual(await t.rt.approvals.decide('nosuchgoal9', a, 'approved'), { kind: 'no_goal' });
  assert.deepEqual(await t.rt.approvals.decide(goalId, 'ap-0000000000', 'approved'), { kind: 'no_call' });
  const ok = await t.rt.approvals.decide(goalId, a, 'rejected', HOSTILE, 1234567890123);
  assert.equal(ok.kind, 'ok');
  assert.equal(ok.kind === 'ok' && ok.pendingLeft, 1);
  const done = await t.rt.approvals.decide(goalId, a, 'approved');
  assert.equal(done.kind, 'decided');
  assert.deepEqual(done.kind === 'decided' && [done.record.status, done.record.reason], ['rejected', HOSTILE]);
  const last = await t.rt.approvals.decide(goalId, b, 'approved');
  assert.equal(last.kind === 'ok' && last.pendingLeft, 0);

  // The record round-trips through the script's JSON unchanged but for the decision.
  const stored = (await t.rt.approvals.record(goalId, a))!;
  assert.deepEqual(stored, { ...recs[0]!, status: 'rejected', reason: HOSTILE, decidedAt: 1234567890123 });
  const decided = (await approvalEvents(goalId)).filter((e) => e.type === 'approval_decided');
  assert.deepEqual(
    decided.map((e) => (e.type === 'approval_decided' ? [e.callId, e.decision, e.reason, e.tool, e.index] : [])),
    [
      [a, 'rejected', HOSTILE, 'write_file', 0],
      [b, 'approved', undefined, 'write_file', 0],
    ],
  );
  assert.equal(decided[0]!.at, 1234567890123);
  assert.equal((await t.rt.approvals.pendingAll()).filter((p) => p.goalId === goalId).length, 0);
});

test('hostile tool input survives the scripts, and a request on an ended goal stores nothing', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  // The second input's cut falls between the two halves of an emoji: Redis's cjson refuses a
  // lone surrogate, so the preview must not keep one.
  const recs = [
    ...records(goalId, jobId, 1, { content: HOSTILE, lone: '\ud800' }),
    ...records(goalId, jobId, 1, { content: `${'x'.repeat(287)}😀😀` }),
  ];
  assert.match(recs[1]!.input, /x\uFFFD…$/);
  assert.equal((await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs)).kind, 'ok');
  for (const r of recs) {
    assert.equal((await t.rt.approvals.record(goalId, r.callId))?.input, r.input);
    assert.equal((await t.rt.approvals.decide(goalId, r.callId, 'approved', HOSTILE)).kind, 'ok');
  }

  const ended = await t.newGoal();
  await t.rt.lifecycle.cancel(ended, 1);
  const late = records(ended, `${ended}:1:0`, 1);
  const r = await t.rt.approvals.request(ended, `${ended}:1:0`, checkpoint(late), late);
  assert.deepEqual(r, { kind: 'terminal', status: 'cancelled' });
  assert.deepEqual(await t.rt.approvals.records(ended), []);
  assert.equal(await t.rt.approvals.checkpoint(ended, `${ended}:1:0`), null);
});

test('a human decision on an ended goal is refused and changes nothing; timeout and cancel still land', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2);
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const [a, b] = recs.map((r) => r.callId) as [string, string];
  // Ended by a path that released nothing yet (the reconciler would, later).
  assert.ok(await t.rt.lifecycle.exceedBudget(goalId, 'token budget exceeded', 1));

  await assert.rejects(t.rt.approvals.decide(goalId, a, 'approved'), {
    name: 'ValidationError',
    message:
      `goal ${goalId} has ended (budget_exceeded): too late to approve ${a}, ` +
      'the call never runs and its subtask does not go on',
  });
  await assert.rejects(
    t.rt.approvals.decide(goalId, a, 'rejected', 'no'),
    /has ended \(budget_exceeded\): too late to reject/,
  );
  assert.equal((await t.rt.approvals.record(goalId, a))?.status, 'pending');
  assert.deepEqual(
    (await approvalEvents(goalId)).map((e) => e.type),
    ['approval_requested', 'approval_requested'],
  );

  const cancelled = await t.rt.approvals.decide(goalId, a, 'cancelled', 'the goal is budget_exceeded');
  assert.equal(cancelled.kind === 'ok' && cancelled.pendingLeft, 1);
  assert.equal((await t.rt.approvals.decide(goalId, b, 'timeout', 'no decision')).kind, 'ok');
  assert.equal((await t.rt.approvals.pendingAll()).filter((p) => p.goalId === goalId).length, 0);
});

test("readers leave out an ended goal's calls, still pending until released", async () => {
  const ended = await t.newGoal();
  const live = await t.newGoal();
  for (const goalId of [ended, live]) {
    const recs = records(goalId, `${goalId}:1:0`, 1);
    await t.rt.approvals.request(goalId, `${goalId}:1:0`, checkpoint(recs), recs);
  }
  assert.ok(await t.rt.lifecycle.fail(ended, 'a planner failure', 1));
  const reader = new GoalReader(t.rt.cfg, t.rt.redis);
  assert.deepEqual(await reader.pendingApprovals(ended), []);
  assert.deepEqual((await reader.summary(ended)).approvals, []);
  const all = new Set((await reader.pendingApprovals()).map((r) => r.goalId));
  assert.ok(all.has(live) && !all.has(ended), [...all].join(','));
  assert.equal((await reader.pendingApprovals(live)).length, 1);
  assert.equal((await t.rt.approvals.records(ended))[0]?.status, 'pending');
});

test('a request refreshes every goal key TTL; the sweep keeps a waiting goal, then removes its keys', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const k = t.rt.goals.keys;
  await t.rt.redis.expire(k.goal(goalId), 5);
  await t.rt.redis.expire(k.events(goalId), 5);
  await t.rt.redis.hset(k.goal(goalId), 'ttlAt', Date.now() + 5000);
  // A revised artifact's old version, kept in the history with the goal's other keys.
  await t.rt.redis.hset(k.history(goalId), 'report.md@1', '{}');
  await t.rt.redis.expire(k.history(goalId), 5);
  const recs = records(goalId, jobId, 1);
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const ttl = t.rt.cfg.goalKeyTtlSeconds;
  const waiting = [k.goal(goalId), k.events(goalId), k.approvals(goalId), k.checkpoints(goalId), k.history(goalId)];
  for (const key of waiting) {
    const left = await t.rt.redis.ttl(key);
    assert.ok(left > ttl - 10 && left <= ttl, `${key}: ttl ${left}`);
  }
  assert.ok(ttl >= 2 * t.rt.cfg.approvalTimeoutSeconds);
  // The goal records when its keys now expire: its next move judges a renewal by that.
  const ttlAt = Number(await t.rt.redis.hget(k.goal(goalId), 'ttlAt'));
  assert.ok(Math.abs(ttlAt - (Date.now() + ttl * 1000)) < 10_000, `ttlAt ${ttlAt}`);

  // A goal whose call waits is live: however late the sweep, it stays.
  const later = Date.now() + (t.rt.cfg.retentionSeconds + 1) * 1000;
  const before = await keysOfGoal(t.rt, goalId);
  await sweep(t.rt, later);
  assert.deepEqual(await keysOfGoal(t.rt, goalId), before);
  assert.ok(before.includes(k.approvals(goalId)) && before.includes(k.checkpoints(goalId)));
  await t.rt.lifecycle.cancel(goalId, 1);
  await sweep(t.rt, later);
  assert.deepEqual(await keysOfGoal(t.rt, goalId), []);
});

test('the reconciler releases pending calls of goals that ended or are gone', async () => {
  const ended = await t.newGoal();
  const gone = await t.newGoal();
  const live = await t.newGoal();
  const byGoal = new Map<string, ApprovalRecord[]>();
  for (const goalId of [ended, gone, live]) {
    const recs = records(goalId, `${goalId}:1:0`, 1);
    byGoal.set(goalId, recs);
    await t.rt.approvals.request(goalId, `${goalId}:1:0`, checkpoint(recs), recs);
  }
  await t.rt.lifecycle.fail(ended, 'a sibling failed the goal', 1);
  await t.rt.redis.del(...t.rt.goals.keys.goalKeys(gone));

  const report = await reconcile(t.rt);
  assert.ok(report.released >= 2, `released ${report.released}`);
  const left = (await t.rt.approvals.pendingAll()).map((p) => p.goalId);
  assert.ok(left.includes(live) && !left.includes(ended) && !left.includes(gone), left.join(','));
  const rec = (await t.rt.approvals.record(ended, byGoal.get(ended)![0]!.callId))!;
  assert.deepEqual([rec.status, rec.reason], ['cancelled', 'the goal is failed']);
});

test('past expiresAt a human decision is refused; the sweep times the call out, once, and counts it', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2);
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const [a, b] = recs.map((r) => r.callId) as [string, string];
  const expiresAt = recs[0]!.expiresAt;
  // Just before the timeout a decision lands; at it, it is refused and changes nothing.
  assert.equal((await t.rt.approvals.decide(goalId, a, 'approved', undefined, expiresAt - 1)).kind, 'ok');
  const late = await t.rt.approvals.decide(goalId, b, 'rejected', 'too late', expiresAt);
  assert.equal(late.kind, 'expired');
  assert.equal((await t.rt.approvals.record(goalId, b))?.status, 'pending');

  const timeouts = async () =>
    (await t.rt.metrics.approvals.get()).values.find((v) => v.labels.decision === 'timeout')?.value ?? 0;
  // Calls of this file's earlier goals time out before these: out of the way first.
  await expireApprovals(t.rt, expiresAt - 1);
  assert.equal((await t.rt.approvals.record(goalId, b))?.status, 'pending', 'timed out early');
  const before = await timeouts();
  // A pending-set member whose goal is gone is dropped, never decided.
  await t.rt.redis.zadd(t.rt.goals.keys.approvalsPending(), expiresAt - 10, 'nosuchgoal9/ap-0000000000');
  assert.equal(await expireApprovals(t.rt, expiresAt), 1);
  assert.equal(await expireApprovals(t.rt, expiresAt + 1000), 0, 'decided twice');
  const rec = (await t.rt.approvals.record(goalId, b))!;
  assert.deepEqual(
    [rec.status, rec.reason, rec.decidedAt],
    ['timeout', 'no decision within 60 s (approvalTimeoutSeconds)', expiresAt],
  );
  assert.equal((await t.rt.approvals.record(goalId, a))?.status, 'approved');
  assert.equal(await timeouts(), before + 1);
  const pending = await t.rt.redis.zrange(t.rt.goals.keys.approvalsPending(), '0', '-1');
  assert.ok(!pending.some((m) => m.startsWith(`${goalId}/`) || m.startsWith('nosuchgoal9/')), pending.join(','));
});

test('a call whose time ran out is no longer waiting, before the sweep decides it', async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2);
  recs[1]!.expiresAt = Date.now() - 1; // its time ran out; the sweep has not run
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const reader = new GoalReader(t.rt.cfg, t.rt.redis);
  const waiting = (await reader.pendingApprovals(goalId)).map((r) => r.callId);
  assert.deepEqual(waiting, [recs[0]!.callId]);
  const all = (await reader.pendingApprovals()).filter((r) => r.goalId === goalId).map((r) => r.callId);
  assert.deepEqual(all, [recs[0]!.callId]);
  const members = await t.rt.redis.zrangebyscore(t.rt.goals.keys.approvalsPending(), '-inf', '+inf');
  const live = members.filter((m) => m.startsWith(`${goalId}/`)).length;
  assert.equal(live, 2, 'both are still in the pending set');
  const counted = await t.rt.approvals.pendingCount();
  assert.equal(counted, (await t.rt.approvals.pendingAll()).length, 'the gauge counts what is listed');
  assert.ok(!(await t.rt.approvals.pendingAll()).some((p) => p.callId === recs[1]!.callId));
});

test("a human's decision is judged on Redis's clock, not on the deciding host's", async (ctx) => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2).map((r, i) => ({ ...r, expiresAt: r.requestedAt + (i ? 60_000 : -1) }));
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const [expired, live] = recs.map((r) => r.callId) as [string, string];
  const realNow = Date.now.bind(Date);
  // One mock (a second would wrap the first, and only it is restored): its skew changes.
  let skew = 0;
  ctx.mock.method(Date, 'now', () => realNow() + skew);
  // A host an hour behind would still take the expired call; one an hour ahead would refuse the live one.
  skew = -3_600_000;
  assert.equal((await t.rt.approvals.decide(goalId, expired, 'approved')).kind, 'expired');
  skew = 3_600_000;
  const ok = await t.rt.approvals.decide(goalId, live, 'approved');
  assert.equal(ok.kind, 'ok');
  assert.ok(Math.abs(ok.record!.decidedAt! - realNow()) < 60_000, `decided at ${ok.record!.decidedAt}`);
});

test("many calls of one turn: each call's whole input, its job's checkpoint read once", async () => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 40);
  const cp = checkpoint(recs);
  const uses = recs.map((r, i) => ({
    id: `tu${i}`,
    name: r.tool,
    input: { name: `f${i}.py`, content: 'x'.repeat(i) },
  }));
  await t.rt.approvals.request(goalId, jobId, { ...cp, agent: { ...cp.agent, uses } } as JobCheckpoint, recs);
  await redis.client.config('RESETSTAT');
  const inputs = await t.rt.approvals.fullInputs([...recs, { jobId, callId: newCallId() }], () => goalId);
  const reads = (await redis.client.info('commandstats')).match(/cmdstat_hmget:calls=(\d+)/)?.[1];
  assert.equal(reads, '1', 'one checkpoint read');
  assert.deepEqual(
    inputs.slice(0, 40).map((s) => JSON.parse(s!)),
    uses.map((u) => u.input),
  );
  assert.equal(inputs[40], null, 'a call its checkpoint does not hold');
});

test("the waiting calls a human is shown are judged on Redis's clock too", async (ctx) => {
  const goalId = await t.newGoal();
  const jobId = `${goalId}:1:0`;
  const recs = records(goalId, jobId, 2).map((r, i) => ({ ...r, expiresAt: r.requestedAt + (i ? 60_000 : -1) }));
  await t.rt.approvals.request(goalId, jobId, checkpoint(recs), recs);
  const reader = new GoalReader(t.rt.cfg, t.rt.redis);
  const realNow = Date.now.bind(Date);
  let skew = 0;
  ctx.mock.method(Date, 'now', () => realNow() + skew);
  // A host an hour behind would list the expired call; one an hour ahead would hide the live one.
  for (skew of [-3_600_000, 3_600_000]) {
    assert.deepEqual(
      (await reader.pendingApprovals(goalId)).map((r) => r.callId),
      [recs[1]!.callId],
    );
    assert.ok((await reader.pendingApprovals()).some((r) => r.callId === recs[1]!.callId));
    assert.ok(!(await reader.pendingApprovals()).some((r) => r.callId === recs[0]!.callId));
  }
});
