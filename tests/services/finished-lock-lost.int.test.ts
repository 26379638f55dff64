// A subtask whose run recorded its artifact but whose job's lock was lost before BullMQ stored
// the return (the lock key gone, as its expiry would leave it): the stalled check hands the job
// out again. The next delivery returns the recorded result (no second run, no second tokens);
// a job the stalled check fails for good after that still counts done for the reflector. A run
// whose lock another worker's delivery holds before the run learns of it writes nothing.
// Real Redis, BullMQ workers and the real AnthropicProvider against a local Messages-API server.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import { type Job, Queue } from 'bullmq';
import { collectOutcomes } from '../../services/reflector/outcomes.ts';
import { recordSubtaskFailure } from '../../services/subagent-worker/final-failure.ts';
import { processSubagentJob } from '../../services/subagent-worker/subagent-job.ts';
import { REFLECT_QUEUE, reflectJobId, subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { type RunningService, startService } from '../../shared/runtime/service.ts';
import { testRuntime } from '../../testing/agent-harness.ts';
import { dispatchedGoal as dispatched } from '../../testing/dispatched-goal.ts';
import { type MessagesApiServer, startMessagesApiServer, text, toolUse } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
const ROLE = 'research-specialist';

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer();
  server.setHandler(() => text('Summary: the facts, with citations [1].'));
});
// The worker's stop closes its runtime: each test has its own.
beforeEach(() => {
  rt = testRuntime(redis.url, server, {
    DEEPQ_STALLED_INTERVAL_MS: '300',
    DEEPQ_MAX_STALLED_COUNT: '1',
    DEEPQ_LOCK_DURATION_MS: '5000',
  });
});
afterEach(() => rmSync(rt.cfg.vfs.blobDir, { recursive: true, force: true }));
after(() => server?.close());

/** A goal running its first cycle: one subtask in its role's queue, the reflection waiting on it. */
const dispatchedGoal = (role = ROLE, artifact = 'summary.md') =>
  dispatched(rt, [{ role, instruction: 'summarise', expected_artifact: artifact, read_files: [] }]);

/** The role's worker, losing each job's lock after its run (`lose` says on which deliveries). */
function workerLosingLocks(lose: (delivery: number) => boolean, roleName = ROLE): Promise<RunningService> {
  const role = rt.cfg.roles.find((r) => r.name === roleName)!;
  const queueName = subagentQueueName(roleName);
  const queue = rt.queues.get(queueName);
  return startService({
    rt,
    name: 'worker',
    queueName,
    role: roleName,
    concurrency: 1,
    handler: async (job, signal, token) => {
      const res = await processSubagentJob({ rt, role, queue }, job, signal, token);
      if (lose(job.attemptsStarted)) await redis.client.del(`${rt.cfg.prefix}:${queueName}:${job.id}:lock`);
      return res;
    },
    onFinalFailure: recordSubtaskFailure(rt),
  });
}

const eventTypes = async (goalId: string) => (await rt.goals.events(goalId)).map((e) => e.event.type);

test('a job handed out again after its run recorded the artifact returns that result, not a new run', {
  timeout: 60_000,
}, async () => {
  const goalId = await dispatchedGoal();
  server.clear();
  const svc = await workerLosingLocks((delivery) => delivery === 1);
  const queue = new Queue(subagentQueueName(ROLE), { connection: rt.bull, prefix: rt.cfg.prefix });
  try {
    const jobId = subtaskJobId(goalId, 1, 0);
    await until(async () => (await queue.getJobState(jobId)) === 'completed', 30_000);
    const job = (await queue.getJob(jobId)) as Job;
    assert.ok(job.attemptsStarted >= 2, `delivered ${job.attemptsStarted} time(s): the lock loss was not seen`);
    assert.equal(job.returnvalue.status, 'done');
    assert.equal(job.returnvalue.bytes, Buffer.byteLength('Summary: the facts, with citations [1].'));
    assert.equal(server.messageRequests().length, 1, 'the model was asked once');
    const entry = (await rt.vfs.stat(goalId, 'summary.md'))!;
    assert.equal(entry.version, 1, 'written once');
    assert.equal(job.returnvalue.threadId, entry.threadId, "the result names the run's thread");
    const types = await eventTypes(goalId);
    assert.equal(types.filter((t) => t === 'subtask_started').length, 1);
    assert.equal(types.filter((t) => t === 'subtask_finished').length, 1);
  } finally {
    await queue.close();
    await svc.stop();
  }
});

test('a job the stalled check fails after its run recorded the artifact counts done in the cycle', {
  timeout: 60_000,
}, async () => {
  const goalId = await dispatchedGoal();
  server.clear();
  const svc = await workerLosingLocks(() => true);
  const queue = new Queue(subagentQueueName(ROLE), { connection: rt.bull, prefix: rt.cfg.prefix });
  const reflect = new Queue(REFLECT_QUEUE, { connection: rt.bull, prefix: rt.cfg.prefix });
  try {
    const jobId = subtaskJobId(goalId, 1, 0);
    await until(async () => (await queue.getJobState(jobId)) === 'failed', 30_000);
    const failed = (await queue.getJob(jobId)) as Job;
    assert.match(failed.failedReason, /stalled/);
    assert.equal(server.messageRequests().length, 1, 'the model was asked once');
    const parent = (await reflect.getJob(reflectJobId(goalId, 1))) as Job;
    await until(async () => (await parent.getState()) === 'waiting', 10_000);
    const outcomes = await collectOutcomes(rt, parent, (await rt.goals.get(goalId))!);
    assert.deepEqual(
      outcomes.map((o) => [o.index, o.status, o.artifact, o.reason]),
      [[0, 'done', 'summary.md', undefined]],
    );
    assert.ok(!(await eventTypes(goalId)).includes('subtask_failed'));
    // BullMQ failed it before any processor ran: deepq_jobs_total counts it, once.
    const failedCount = (await rt.metrics.jobs.get()).values.find((v) => v.labels.status === 'failed')?.value;
    assert.equal(failedCount, 1);
  } finally {
    await queue.close();
    await reflect.close();
    await svc.stop();
  }
});

/**
 * While a job's first run waits for its model, another worker takes the job (its lock expired
 * before the renewal saw it): that worker's lock is held for 1.5 s, then expires too, and the
 * stalled check hands the job out here again. The model's reply to the first run is `first`.
 */
async function lockTakenDuringFirstCall(role: string, artifact: string, first: () => unknown) {
  const goalId = await dispatchedGoal(role, artifact);
  const jobId = subtaskJobId(goalId, 1, 0);
  const lockKey = `${rt.cfg.prefix}:${subagentQueueName(role)}:${jobId}:lock`;
  server.clear();
  let calls = 0;
  server.setHandler(async () => {
    if (calls++ > 0) return text('```python\nprint(2)\n```');
    await redis.client.set(lockKey, 'another-worker:1', 'PX', 1500);
    return first() as ReturnType<typeof text>;
  });
  const svc = await workerLosingLocks(() => false, role);
  const queue = new Queue(subagentQueueName(role), { connection: rt.bull, prefix: rt.cfg.prefix });
  return { goalId, jobId, queue, svc };
}

test("a run whose job another worker took meanwhile writes nothing; the job's next delivery runs it", {
  timeout: 60_000,
}, async () => {
  const { goalId, jobId, queue, svc } = await lockTakenDuringFirstCall(ROLE, 'summary.md', () => text('Summary 1.'));
  try {
    // The refused write still stores the first run's transcript: it ran and spent tokens.
    await until(async () => (await redis.client.zcard(rt.goals.keys.threads(goalId))) >= 1, 15_000);
    assert.equal(await rt.vfs.stat(goalId, 'summary.md'), null, 'the late write landed');
    assert.ok(!(await eventTypes(goalId)).includes('subtask_finished'));
    await until(async () => (await queue.getJobState(jobId)) === 'completed', 30_000);
    const job = (await queue.getJob(jobId)) as Job;
    const entry = (await rt.vfs.stat(goalId, 'summary.md'))!;
    assert.equal(entry.version, 1);
    assert.equal(job.returnvalue.threadId, entry.threadId, "the second run's artifact");
    assert.equal(server.messageRequests().length, 2);
    assert.equal((await eventTypes(goalId)).filter((t) => t === 'subtask_finished').length, 1);
    // The timeline says the second start is the same attempt again, not a new one.
    const starts = (await rt.goals.events(goalId)).flatMap((e) =>
      e.event.type === 'subtask_started' ? [e.event] : [],
    );
    assert.deepEqual(
      starts.map((e) => [e.attempt, e.restarted ?? false]),
      [
        [1, false],
        [1, true],
      ],
    );
  } finally {
    await queue.close();
    await svc.stop();
  }
});

test('a tool write refused for a lost lock ends the run: the model is not asked on with the error', {
  timeout: 60_000,
}, async () => {
  const write = () => toolUse('write_file', { name: 'draft.py', content: 'print(1)' });
  const { goalId, jobId, queue, svc } = await lockTakenDuringFirstCall('code-writer', 'main.py', write);
  try {
    await until(async () => (await queue.getJobState(jobId)) === 'completed', 30_000);
    const [first, second] = server.messageRequests();
    assert.equal(server.messageRequests().length, 2);
    // The second request is the next delivery's fresh run, not the first run going on.
    assert.equal(second!.body.messages.length, first!.body.messages.length);
    assert.equal(await rt.vfs.stat(goalId, 'draft.py'), null);
    assert.equal(await rt.vfs.read(goalId, 'main.py'), 'print(2)\n');
  } finally {
    await queue.close();
    await svc.stop();
  }
});
