// A re-delivered plan job never dispatches twice, and never asks the model twice:
// job ids are deterministic (`<goalId>:<step>:<index>`) and the chosen plan is stored.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { processPlanJob } from '../../services/planner/plan-job.ts';
import type { ModelProvider } from '../../shared/agent/providers/types.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE, planJobId, REFLECT_QUEUE, subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRuntime, type Runtime } from '../../shared/runtime/runtime.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
let rt: Runtime;
let calls = 0;
before(async () => {
  await redis.ready;
  const cfg = loadConfig({
    REDIS_URL: redis.url,
    DEEPQ_PREFIX: 'dd',
    DEEPQ_MODEL_PROVIDER: 'scripted',
    LOG_LEVEL: 'silent',
    DEEPQ_BLOB_DIR: tempDir('dd-'),
  });
  rt = createRuntime(cfg, 'test');
  const inner = rt.provider;
  const counting: ModelProvider = {
    name: inner.name,
    createMessage: (req, ctx) => {
      calls++;
      return inner.createMessage(req, ctx);
    },
  };
  rt.provider = counting;
});
after(async () => rt?.close());

test('processing the same plan job twice dispatches one flow and calls the model once', async () => {
  const goalId = 'dd0000000001';
  await rt.goals.create(goalId, 'Write a parser', {}, false);
  await rt.queues.addPlan({ goalId, step: 1 });
  const job = (await rt.queues.get(PLAN_QUEUE).getJob(planJobId(goalId, 1)))!;

  const first = await processPlanJob(rt, job);
  assert.equal(first.status, 'dispatched');
  // A re-delivery (e.g. the worker died after dispatching, before acking): the goal is
  // already running, as it would be found by the stalled-job check.
  const second = await processPlanJob(rt, job);
  assert.equal(second.status, 'dispatched');
  assert.equal(calls, 1, 'the model was asked twice for the same step');

  const research = await rt.queues
    .get(subagentQueueName('research-specialist'))
    .getJobCounts('waiting', 'active', 'completed');
  const code = await rt.queues.get(subagentQueueName('code-writer')).getJobCounts('waiting', 'active', 'completed');
  assert.equal(research.waiting, 1);
  assert.equal(code.waiting, 1);
  const ids = (await rt.queues.get(subagentQueueName('code-writer')).getJobs(['waiting'])).map((j) => j.id);
  assert.deepEqual(ids, [`${goalId}:1:1`]);
  const parents = await rt.queues.get(REFLECT_QUEUE).getJobCounts('waiting-children');
  assert.equal(parents['waiting-children'], 1);
  const dispatched = (await rt.goals.events(goalId)).filter((e) => e.event.type === 'dispatched');
  assert.equal(dispatched.length, 2, 'each delivery records its attempt');
  assert.equal((await rt.goals.events(goalId)).filter((e) => e.event.type === 'planned').length, 1);
});
