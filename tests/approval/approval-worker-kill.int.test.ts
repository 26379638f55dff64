// A worker process SIGKILLed while its subtask waits for a human: nothing is lost. The paused
// job lives in Redis (its checkpoint, BullMQ's delayed set), so after `deepq approve` a new
// worker process takes it and continues from the saved messages: the model request that asked
// for the tool is not repeated (counted at the Messages-API server), the sibling subtask of
// the same cycle is not run again, and the cycle's reflection waits for the resumed child.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import { type Fleet, runCli, stopProcess } from '../../testing/fleet.ts';
import { goalOf, type MessagesApiServer, roleOf } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import {
  events,
  goalFor,
  helperRequests,
  pendingCall,
  sample,
  scrape,
  until,
  useApprovalFleet,
  writerRequests,
} from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

useApprovalFleet(redis, ['writer', 'helper'], {}, (f, s) => {
  fleet = f;
  server = s;
});

test('the worker is SIGKILLed while a call waits; approved, a new worker continues from the saved messages', {
  timeout: 90_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('kill') });
  const call = await pendingCall(fleet, goalId);
  // The sibling finishes while the writer waits.
  await until(async () => (await events(fleet, goalId)).some((e) => e.type === 'subtask_finished' && e.index === 1));

  // The pending call is recorded just before the job moves itself to delayed: kill after the move.
  const job = await fleet.client.queues.get(subagentQueueName('writer')).getJob(subtaskJobId(goalId, 1, 0));
  await until(async () => (await job!.getState()) === 'delayed');
  const old = fleet.procs.find((p) => p.name === 'worker-writer')!;
  await stopProcess(old, 'SIGKILL');
  assert.equal(old.proc.signalCode, 'SIGKILL');
  assert.equal(await job!.getState(), 'delayed', 'the paused job is not waiting in the delayed set');
  const fresh = await fleet.start('worker-writer-2', ['worker', '--role', 'writer']);

  const r = await runCli(['approve', goalId, call.callId], { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(r.code, 0, r.stderr);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await fleet.client.read(goalId, 'kill-out.txt'), 'written by kill\n');

  // The new process resumed the job, from the saved messages, under the saved thread.
  const resumed = fresh
    .output()
    .split('\n')
    .filter((l) => l.includes('resuming after approval'));
  assert.equal(resumed.length, 1, fresh.output());
  assert.equal(JSON.parse(resumed[0]!).threadId, call.threadId);
  const reqs = writerRequests(server, 'kill');
  assert.equal(reqs.length, 2, 'the writer asked the model more (or less) than once per turn');
  assert.equal(reqs[1]!.body.messages.length, 3, 'the resumed request is not the saved conversation plus results');
  assert.deepEqual(reqs[1]!.body.messages[1], reqs[0]!.response?.body && messageOf(reqs[0]!.response.body));

  // No sibling ran twice; the cycle was reflected on once, after the resumed child finished.
  assert.equal(helperRequests(server, 'kill').length, 1, 'the sibling subtask ran again');
  const timeline = await events(fleet, goalId);
  const starts = timeline
    .filter((e) => e.type === 'subtask_started')
    .map((e) => e.type === 'subtask_started' && e.index);
  assert.deepEqual(starts.sort(), [0, 1]);
  const finishedAt = timeline.findIndex((e) => e.type === 'subtask_finished' && e.index === 0);
  const reflectedAt = timeline.findIndex((e) => e.type === 'reflected');
  assert.ok(finishedAt >= 0 && reflectedAt > finishedAt, 'the reflection did not wait for the resumed child');
  const reflections = server
    .messageRequests()
    .filter((q) => roleOf(q.body) === 'reflector' && goalOf(q.body) === goalFor('kill'));
  assert.equal(reflections.length, 1);
  assert.equal(sample(await scrape(fleet.ports.get('worker-writer-2')!), 'deepq_approvals_total', 'approved'), 1);
});

/** The assistant message the Messages API answer becomes in the next request. */
function messageOf(body: unknown): { role: string; content: unknown } {
  return { role: 'assistant', content: (body as { content: unknown }).content };
}
