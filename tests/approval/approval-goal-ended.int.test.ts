// A goal that ends while a tool call waits for a human takes no decision on it, end to end
// (planner, reflector and a worker per role as processes, the CLI as a user runs it). A sibling
// subtask burning the token budget ends the goal budget_exceeded: its worker releases the
// waiting call (cancelled) and wakes the paused job, as the time budget's deadline does, with
// no reconciler pass (its interval is 10 minutes here). A goal ended by a path that released
// nothing still shows no waiting call, and `deepq approve` of it is refused, saying why.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, metricSum, runCli, startFleet } from '../../testing/fleet.ts';
import {
  firstUserText,
  type MessagesApiServer,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { approvalModel, events, goalFor, HELPER_PROMPT, pendingCall, until, writeApprovalConfig } from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

/** The helper of scenario `budget` waits (the writer's call is pending by then), then uses 500k tokens. */
const BURN_AFTER_MS = 3000;

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({
    handler: async (body, i, req) => {
      if (systemText(body).startsWith(HELPER_PROMPT) && firstUserText(body).includes('of budget')) {
        if (body.messages.length > 1) return text('helped');
        await new Promise((r) => setTimeout(r, BURN_AFTER_MS));
        return { ...toolUse('read_file', { name: 'nothing.md' }), usage: { input_tokens: 500_000, output_tokens: 10 } };
      }
      return approvalModel(body, i, req);
    },
  });
  const file = writeApprovalConfig();
  const cfg = JSON.parse(readFileSync(file, 'utf8'));
  cfg.roles.find((r: { name: string }) => r.name === 'helper').tools = ['read_file'];
  writeFileSync(file, JSON.stringify(cfg));
  const env = anthropicEnv(server, { DEEPQ_CONFIG: file, DEEPQ_RECONCILE_INTERVAL_SECONDS: '600' });
  fleet = await startFleet(redis.url, env, { roles: ['writer', 'helper'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

const cli = (args: string[]) => runCli(args, { ...fleet.env, LOG_LEVEL: 'silent' });
const writerJob = (goalId: string) =>
  fleet.client.queues.get(subagentQueueName('writer')).getJob(subtaskJobId(goalId, 1, 0));

/** What `deepq approvals <goal>`, `deepq status <goal>` and `deepq approve` say of a call of an ended goal. */
async function assertNothingToDecide(goalId: string, callId: string, refusal: RegExp): Promise<void> {
  const list = await cli(['approvals', goalId]);
  assert.equal(list.code, 0, list.stderr);
  assert.equal(list.stdout.trim(), '(no tool calls waiting for approval)');
  const status = await cli(['status', goalId]);
  assert.equal(status.code, 0, status.stderr);
  assert.doesNotMatch(status.stdout, /waiting for approval/);
  const all = await cli(['approvals', '--json']);
  assert.ok(!JSON.parse(all.stdout).some((r: { goalId: string }) => r.goalId === goalId), all.stdout);
  const approve = await cli(['approve', goalId, callId]);
  assert.notEqual(approve.code, 0, `approve exited 0: ${approve.stdout}`);
  assert.doesNotMatch(approve.stdout, /goes on/);
  assert.match(approve.stderr, refusal);
}

test('a sibling ends the goal budget_exceeded: the waiting call is cancelled and its job ends at once', {
  timeout: 120_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('budget'), budgets: { maxTokens: 100_000 } });
  const call = await pendingCall(fleet, goalId);
  await until(async () => (await fleet.client.get(goalId)).status === 'budget_exceeded', 30_000, 'budget_exceeded');
  // Released by the worker that ended the goal, well before any reconciler pass.
  const rec = await until(
    async () => {
      const r = await fleet.client.approvals.record(goalId, call.callId);
      return r && r.status !== 'pending' ? r : undefined;
    },
    10_000,
    'the call released',
  );
  assert.equal(rec.status, 'cancelled');
  assert.match(rec.reason ?? '', /^the goal ended budget_exceeded: /);
  const decided = (await events(fleet, goalId)).filter((e) => e.type === 'approval_decided');
  assert.deepEqual(
    decided.map((e) => e.type === 'approval_decided' && [e.callId, e.decision]),
    [[call.callId, 'cancelled']],
  );
  // The paused job was woken: it ended as skipped instead of sleeping until its approval timeout.
  await until(async () => (await (await writerJob(goalId))?.getState()) === 'completed', 10_000, 'the job ended');
  assert.equal(await fleet.client.read(goalId, 'budget-out.txt'), null, 'the write ran');

  await assertNothingToDecide(goalId, call.callId, /already decided: cancelled/);
  assert.equal(await metricSum(fleet, 'deepq_approvals_total', { decision: 'approved' }), 0);
});

test('a goal ended without releasing its calls: none is listed, and approving one is refused', {
  timeout: 120_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('ended') });
  const call = await pendingCall(fleet, goalId);
  // An end that released nothing (a process died between the two): the call is still pending.
  assert.ok(await fleet.client.lifecycle.fail(goalId, 'test: ended, its calls left pending', 1));

  await assertNothingToDecide(goalId, call.callId, /goal \w+ has ended \(failed\): too late to approve ap-\w+/);
  const reject = await cli(['reject', goalId, call.callId, '--reason', 'no']);
  assert.notEqual(reject.code, 0);
  assert.match(reject.stderr, /has ended \(failed\): too late to reject/);
  const rec = await fleet.client.approvals.record(goalId, call.callId);
  assert.equal(rec?.status, 'pending', 'a refused decision changes nothing');
  assert.equal((await events(fleet, goalId)).filter((e) => e.type === 'approval_decided').length, 0);
  assert.equal(await (await writerJob(goalId))?.getState(), 'delayed', 'the refused approve woke the job');
  assert.equal(await metricSum(fleet, 'deepq_approvals_total', { decision: 'approved' }), 0);
});
