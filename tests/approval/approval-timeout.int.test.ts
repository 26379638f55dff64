// The approval timeout needs no worker: with no worker of the role running, a call past its
// expiresAt refuses a late `deepq approve`, and the reflector's sweep (a BullMQ job scheduler)
// times it out by itself: no longer pending (records, `deepq approvals`, the gauge), counted
// once as `timeout`, its paused job promoted. A worker started afterwards resumes the job and
// the model reads the refusal; the paused turn is not asked again.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import { type Fleet, runCli, stopProcess } from '../../testing/fleet.ts';
import type { MessagesApiServer } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { goalFor, pendingCall, resultsOf, sample, scrape, until, useApprovalFleet, writerRequests } from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

const quickTimeout = { DEEPQ_APPROVAL_TIMEOUT_SECONDS: '2', DEEPQ_SWEEP_INTERVAL_SECONDS: '1' };
useApprovalFleet(redis, ['timed', 'helper'], quickTimeout, (f, s) => {
  fleet = f;
  server = s;
});

const cli = (args: string[]) => runCli(args, { ...fleet.env, LOG_LEVEL: 'silent' });
const proc = (name: string) => fleet.procs.find((p) => p.name === name)!;

test('no worker of the role runs: a late approve is refused and the sweep times the call out by itself', {
  timeout: 120_000,
}, async () => {
  // No reflector yet: nothing may decide the call but the human, who comes too late.
  await stopProcess(proc('reflector'));
  const goalId = await fleet.client.enqueue({ goal: goalFor('nobody', 'timed') });
  const call = await pendingCall(fleet, goalId);
  const job = await fleet.client.queues.get(subagentQueueName('timed')).getJob(subtaskJobId(goalId, 1, 0));
  await until(async () => (await job!.getState()) === 'delayed', 10_000);
  await stopProcess(proc('worker-timed'));
  await new Promise((r) => setTimeout(r, Math.max(0, call.expiresAt - Date.now()) + 200));

  const late = await cli(['approve', goalId, call.callId]);
  assert.equal(late.code, 1, late.stdout);
  const iso = new Date(call.expiresAt).toISOString();
  assert.ok(late.stderr.includes(`${call.callId} timed out at ${iso} (no decision within 2 s`), late.stderr);
  assert.equal((await fleet.client.approvals.record(goalId, call.callId))?.status, 'pending', 'the late approve ran');

  const reflector = await fleet.start('reflector-2', ['reflector']);
  const rec = await until(async () => {
    const r = await fleet.client.approvals.record(goalId, call.callId);
    return r?.status === 'timeout' ? r : undefined;
  }, 15_000);
  assert.equal(rec.reason, 'no decision within 2 s (approvalTimeoutSeconds)');
  assert.ok(rec.decidedAt! >= rec.expiresAt);
  assert.deepEqual(await fleet.client.pendingApprovals(), []);
  assert.equal((await cli(['approvals'])).stdout, '(no tool calls waiting for approval)\n');
  assert.equal(sample(await scrape(fleet.ports.get('planner')!), 'deepq_approvals_pending'), 0);
  assert.equal(sample(await scrape(reflector.port), 'deepq_approvals_total', 'decision="timeout"'), 1);
  assert.equal(await job!.getState(), 'waiting', 'the paused job was not promoted');
  const again = await cli(['reject', goalId, call.callId]);
  assert.match(again.stderr, new RegExp(`${call.callId} was already decided: timeout at`));

  // A worker of the role comes back: the job resumes with the refusal, counted once fleet-wide.
  const worker = await fleet.start('worker-timed-2', ['worker', '--role', 'timed']);
  assert.equal((await fleet.client.waitFor(goalId, { timeoutMs: 30_000 })).status, 'done');
  const reqs = writerRequests(server, 'nobody');
  assert.equal(reqs.length, 2, 'the paused turn was asked again (or the resume never asked)');
  const [result] = resultsOf(reqs[1]);
  assert.equal(result!.is_error, true);
  assert.match(String(result!.content), /^error: no human decided on this call in time, it was not run: no decision/);
  assert.equal(await fleet.client.read(goalId, 'nobody-out.txt'), null, 'the timed-out write ran');
  assert.equal(sample(await scrape(worker.port), 'deepq_approvals_total', 'decision="timeout"'), 0);
});
