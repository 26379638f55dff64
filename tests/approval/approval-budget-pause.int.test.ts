// A call waiting for a human while its goal pauses at a budget: approved during the pause, the
// job parks with the goal, and the approval is kept as long as the goal may wait (its awaiting
// retention, past the keys' TTL). Resumed with more time, the approved call runs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Fleet, runCli } from '../../testing/fleet.ts';
import type { MessagesApiServer } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { goalFor, pendingCall, resultsOf, until, useApprovalFleet, writerRequests } from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

useApprovalFleet(redis, ['writer', 'helper'], {}, (f, s) => {
  fleet = f;
  server = s;
});

test('approved while its goal is paused at a budget: the approval outlives the keys; resumed, the call runs', {
  timeout: 90_000,
}, async () => {
  const c = fleet.client;
  const args = ['enqueue', goalFor('paused'), '--max-seconds', '4', '--on-budget', 'pause'];
  const enq = await runCli(args, { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  const call = await pendingCall(fleet, goalId);
  // The time budget runs out while the call waits.
  await until(async () => (await c.get(goalId)).pausedFor === 'budget', 20_000);
  const approved = await runCli(['approve', goalId, call.callId], { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(approved.code, 0, approved.stderr);
  // It says what the call waits for now: not a free worker, a resume.
  assert.match(
    approved.stdout,
    new RegExp(
      `paused at its budget: the subtask goes on once it is resumed \\(deepq resume ${goalId} --max-seconds N\\)`,
    ),
  );

  // The woken job parks with the goal; the decision lasts as long as the goal may wait.
  const parked = c.goals.keys.parked(goalId);
  await until(async () => (await c.redis.hlen(parked)) > 0, 20_000);
  const approvalsTtl = await c.redis.ttl(c.goals.keys.approvals(goalId));
  assert.ok(fleet.cfg.awaitingRetentionSeconds > fleet.cfg.goalKeyTtlSeconds);
  assert.ok(
    approvalsTtl >= fleet.cfg.awaitingRetentionSeconds,
    `the approvals expire in ${approvalsTtl} s, before the goal stops waiting`,
  );

  const resumed = await runCli(['resume', goalId, '--max-seconds', '300'], { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(resumed.code, 0, resumed.stderr);
  const g = await c.waitFor(goalId, { timeoutMs: 45_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await c.read(goalId, 'paused-out.txt'), 'written by paused\n');
  const reqs = writerRequests(server, 'paused');
  assert.equal(reqs.length, 2, 'the paused turn was asked again');
  assert.notEqual(resultsOf(reqs[1])[0]!.is_error, true);
});
