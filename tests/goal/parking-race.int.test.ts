// A resume wakes a goal's parked jobs and takes them off its parked list. A woken job that finds
// the raised budget spent at once parks again, writing its entry anew: a wake from a CLI far
// from Redis (40 ms each way) then deleted that new entry, and the job stayed delayed through the
// next resume, its goal `running` for the awaiting retention (30 days). Real BullMQ and Redis.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Job, Worker } from 'bullmq';
import { GoalClient } from '../../cli/goal-client.ts';
import { isPausedForBudget, parkForBudget } from '../../shared/goal/parking.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { startFaultProxy } from '../../testing/fault-proxy.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const STEPS = { kind: 'steps', reason: 'steps ran out' } as Parameters<
  VfsTestRuntime['rt']['lifecycle']['pauseForBudget']
>[1];

test('a job that parks again right after a resume woke it stays listed, and the next resume wakes it', async (tc) => {
  // Closed at the test's end, while Redis is still up (the file's hooks stop it).
  const closing: (() => Promise<unknown>)[] = [];
  tc.after(async () => {
    for (const c of closing.reverse()) await c().catch(() => {});
  });
  const { rt } = t;
  const goalId = await t.newGoal();
  await rt.redis.hset(rt.goals.keys.goal(goalId), 'budgets', JSON.stringify({ maxSteps: 1, onBudget: 'pause' }));
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  await rt.lifecycle.beginPlanning(goalId);
  await rt.lifecycle.dispatch(goalId, 1, plan);
  await rt.lifecycle.pauseForBudget(goalId, STEPS, 1);
  const queue = rt.queues.get(subagentQueueName('critic'));
  let runs = 0;
  const connection = createRedis(redis.url, 'deepq:test:worker');
  closing.push(async () => connection.disconnect());
  const worker = new Worker(
    queue.name,
    async (job: Job, token?: string) => {
      runs++;
      if (isPausedForBudget((await rt.goals.get(goalId))!)) return parkForBudget(rt, job, token, goalId);
      // Woken by the first resume: its first model call finds the raise spent, and it parks again.
      if (runs === 2) {
        await rt.lifecycle.pauseForBudget(goalId, STEPS, 1);
        return parkForBudget(rt, job, token, goalId);
      }
      return 'finished';
    },
    { connection, prefix: rt.cfg.prefix },
  );
  closing.push(() => worker.close());
  const jobId = `${goalId}:1:0`;
  await queue.add('subtask', { goalId }, { jobId });
  const parkedAs = async () => (await rt.redis.hget(rt.goals.keys.parked(goalId), jobId)) ?? undefined;
  const first = await until(parkedAs, 10_000, 'parked at start');
  const proxy = await startFaultProxy({ host: '127.0.0.1', port: redis.server.port });
  closing.push(() => proxy.close());
  const remote = new GoalClient({ ...rt.cfg, redisUrl: proxy.url });
  closing.push(() => remote.close());
  proxy.delay(40);
  await remote.resume(goalId, { raise: { maxSteps: 5 } });
  await until(
    async () => runs >= 2 && (await (await queue.getJob(jobId))?.getState()) === 'delayed',
    10_000,
    'parked again',
  );
  await new Promise((r) => setTimeout(r, 500)); // the slow wake's last step lands
  const again = await parkedAs();
  assert.ok(again && again !== first, 'the second parking is listed');
  await remote.resume(goalId, { raise: { maxSteps: 9 } });
  await until(
    async () => (await (await queue.getJob(jobId))?.getState()) === 'completed',
    10_000,
    'woken by the second resume',
  );
  assert.equal(runs, 3);
});
