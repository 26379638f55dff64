// A subtask's failure for good is on its goal's timeline once, before the reflection that reads
// it. The worker that saw the failure records it while the cycle runs; a job BullMQ fails
// outside its processor (stalled too often) releases the reflection at once, and when the
// reflection moved first the worker's late record is refused and the reflector records it.
// Real Redis and BullMQ: the stall made as a dead worker makes it (a job taken, its lock gone,
// twice), the reflector's own outcome reading.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import { type Job, Queue, Worker } from 'bullmq';
import { collectOutcomes } from '../../services/reflector/outcomes.ts';
import { recordSubtaskFailure } from '../../services/subagent-worker/final-failure.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { REFLECT_QUEUE, reflectJobId, subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { testRuntime } from '../../testing/agent-harness.ts';
import { dispatchedGoal as dispatched } from '../../testing/dispatched-goal.ts';
import { type MessagesApiServer, startMessagesApiServer } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
const ROLE = 'research-specialist';

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer();
});
beforeEach(() => {
  rt = testRuntime(redis.url, server, { DEEPQ_MAX_STALLED_COUNT: '1' });
});
afterEach(async () => {
  rmSync(rt.cfg.vfs.blobDir, { recursive: true, force: true });
  await rt.close();
});
after(() => server?.close());

/** A goal running its first cycle of `n` subtasks, the reflection waiting on them. */
const dispatchedGoal = (n = 2) =>
  dispatched(
    rt,
    Array.from({ length: n }, (_, i) => ({
      role: ROLE,
      instruction: `part ${i}`,
      expected_artifact: `part-${i}.md`,
      read_files: [],
    })),
  );

const failure = (index: number, reason = 'boom') =>
  ({ type: 'subtask_failed', step: 1, index, role: ROLE, artifact: `part-${index}.md`, reason }) as const;

async function timeline(goalId: string): Promise<TimelineEvent[]> {
  return (await rt.goals.events(goalId)).map((e) => e.event);
}

const failedIndexes = async (goalId: string) =>
  (await timeline(goalId)).flatMap((e) => (e.type === 'subtask_failed' ? [e.index] : []));

test("the worker's record lands only while the cycle runs; the reflector's once, however far back", async () => {
  const goalId = await dispatchedGoal();
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(0), true), true);
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(0), true), false, 'a re-sent record');
  // The siblings' events pile up after it: the look back pages through them to the cycle's start.
  for (let i = 0; i < 250; i++) {
    await rt.goals.appendEvent(goalId, {
      type: 'tool_called',
      step: 1,
      index: 1,
      role: ROLE,
      threadId: 't',
      tool: 'x',
      ms: 1,
      ok: true,
    });
  }
  assert.equal((await rt.lifecycle.reflectJobStart(goalId, 1))?.moved, true);
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(0), false), false, 'recorded twice');
  // The reflection began: a worker's record comes too late, the reflector's lands, once.
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(1), true), false, "a late worker's record");
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(1), false), true);
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(1), false), false, 'a reflection run again');
  assert.deepEqual(await failedIndexes(goalId), [0, 1]);
  assert.equal(await rt.goals.subtaskFailed('no-such-goal', failure(0), false), false);
});

test('a reason holding half an emoji is stored whole: the next failure of the cycle still reads it back', async () => {
  const goalId = await dispatchedGoal(3);
  // V8's JSON.parse error quotes a bad token as one UTF-16 unit: half of '🔍'.
  const half = 'output is not valid JSON: Unexpected token \'\ud83d\', "🔍 Looks" is not valid JSON';
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(0, half), true), true);
  // Each record reads the cycle's earlier ones back (cjson refuses a lone surrogate's escape).
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(1), true), true);
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(0, half), true), false, 'a re-sent record');
  const [first] = (await timeline(goalId)).filter((e) => e.type === 'subtask_failed');
  assert.ok(first?.type === 'subtask_failed' && first.reason?.isWellFormed(), JSON.stringify(first));
  assert.match(String(first.reason), /Unexpected token '\uFFFD'/);
});

test('an event stored with a lone surrogate escape (by an older version) is skipped, not fatal', async () => {
  const goalId = await dispatchedGoal(2);
  const old = JSON.stringify({ ...failure(0), reason: 'cut at \ud83d', at: Date.now() });
  assert.match(old, /\\ud83d/);
  await redis.client.xadd(rt.goals.keys.events(goalId), '*', 'e', old);
  assert.equal(await rt.goals.subtaskFailed(goalId, failure(1), true), true);
  assert.deepEqual(await failedIndexes(goalId), [0, 1]);
});

/**
 * Fails subtask `index` as a worker process dying with it twice does: taken, its lock gone
 * before the stalled check, twice (DEEPQ_MAX_STALLED_COUNT 1); the next worker to take it fails
 * it without running it (BullMQ's deferred failure). Plain BullMQ workers: no deepq hook sees it.
 */
async function stallTwice(goalId: string, index: number): Promise<Job> {
  const queueName = subagentQueueName(ROLE);
  const opts = { connection: rt.bull, prefix: rt.cfg.prefix, maxStalledCount: 1 };
  // A check is skipped within stalledInterval of the last one (its key's PX): 1 ms, waited out.
  const stalled = new Worker(queueName, null, { ...opts, autorun: false, stalledInterval: 1 });
  const check = async () => {
    await new Promise((r) => setTimeout(r, 5));
    await (stalled as unknown as { moveStalledJobsToWait(): Promise<void> }).moveStalledJobsToWait();
  };
  const jobId = subtaskJobId(goalId, 1, index);
  const queue = new Queue(queueName, { connection: rt.bull, prefix: rt.cfg.prefix });
  try {
    for (let delivery = 1; delivery <= 2; delivery++) {
      const job = await until(async () => {
        const j = (await stalled.getNextJob(`dead-${delivery}`, { block: false })) as Job | undefined;
        if (j && j.id !== jobId) assert.fail(`took ${j.id}`);
        return j;
      });
      await check(); // marks the active job as a stall candidate
      await redis.client.del(`${rt.cfg.prefix}:${queueName}:${job.id}:lock`);
      await check();
      assert.equal(await queue.getJobState(jobId), 'waiting', `stall ${delivery} not seen`);
    }
    const next = new Worker(queueName, async () => assert.fail('a job stalled too often ran'), opts);
    await until(async () => (await queue.getJobState(jobId)) === 'failed', 10_000).finally(() => next.close());
    return (await queue.getJob(jobId)) as Job;
  } finally {
    await queue.close();
    await stalled.close();
  }
}

test('a job stalled too often whose worker never recorded it: the reflector records it as it reads the outcomes', {
  timeout: 60_000,
}, async () => {
  const goalId = await dispatchedGoal(1);
  const failed = await stallTwice(goalId, 0);
  assert.match(failed.failedReason, /stalled more than allowable limit/);
  assert.deepEqual(await failedIndexes(goalId), [], 'recorded by nobody yet');
  const reflect = new Queue(REFLECT_QUEUE, { connection: rt.bull, prefix: rt.cfg.prefix });
  try {
    const parent = (await reflect.getJob(reflectJobId(goalId, 1))) as Job;
    await until(async () => (await parent.getState()) === 'waiting', 10_000);
    // The worker that saw it records it late, after the reflection began: refused.
    const begun = (await rt.lifecycle.reflectJobStart(goalId, 1))!;
    await recordSubtaskFailure(rt)(failed, new Error(failed.failedReason));
    assert.deepEqual(await failedIndexes(goalId), []);
    const outcomes = await collectOutcomes(rt, parent, begun.goal);
    assert.deepEqual(
      outcomes.map((o) => [o.index, o.status]),
      [[0, 'failed']],
    );
    await collectOutcomes(rt, parent, begun.goal); // the reflection run again
    const events = await timeline(goalId);
    const recorded = events.filter((e) => e.type === 'subtask_failed');
    assert.equal(recorded.length, 1);
    assert.match(String(recorded[0]!.type === 'subtask_failed' && recorded[0]!.reason), /stalled/);
  } finally {
    await reflect.close();
  }
});

test('a job failed for good whose worker recorded it in time is not recorded again by the reflector', {
  timeout: 60_000,
}, async () => {
  const goalId = await dispatchedGoal(1);
  const failed = await stallTwice(goalId, 0);
  await recordSubtaskFailure(rt)(failed, new Error(failed.failedReason));
  assert.deepEqual(await failedIndexes(goalId), [0]);
  const reflect = new Queue(REFLECT_QUEUE, { connection: rt.bull, prefix: rt.cfg.prefix });
  try {
    const parent = (await reflect.getJob(reflectJobId(goalId, 1))) as Job;
    const begun = (await rt.lifecycle.reflectJobStart(goalId, 1))!;
    await collectOutcomes(rt, parent, begun.goal);
    assert.deepEqual(await failedIndexes(goalId), [0]);
  } finally {
    await reflect.close();
  }
});
