// Chaos: 2 processes per service (planner, reflector, each role's worker), a random one
// SIGKILLed every second and restarted with the same arguments, while 30 goals run. A crash
// loses nothing: every goal ends done, every expected artifact exists exactly once (version
// 1, written by its own job) with the exact content the scripted model gave for it.
// Re-executions are counted and reported, not forbidden: delivery is at-least-once.
//
// Stalled-job recovery is tuned for the test: a lock of 4 s (renewed every 2 s) and a
// stalled check every 1 s, so a killed process's jobs go back to the queue within ~4-6 s
// instead of the default 30-45 s.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import type { Job } from 'bullmq';
import { processPlanJob } from '../../services/planner/plan-job.ts';
import { processReflectJob } from '../../services/reflector/reflect-job.ts';
import type { ModelProvider } from '../../shared/agent/providers/types.ts';
import { PLAN_QUEUE, planJobId, REFLECT_QUEUE, reflectJobId, subagentQueueName } from '../../shared/runtime/queues.ts';
import { assertNothingLost, type ChaosReport, formatReport, runChaos } from '../../testing/chaos.ts';
import { useRedis } from '../../testing/redis.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
before(async () => {
  await redis.ready;
});

test('30 goals under a SIGKILL a second: all done, each artifact exactly once and complete', {
  timeout: 240_000,
}, async (t) => {
  const report: ChaosReport = await runChaos(redis.url, {
    goals: 30,
    replicas: 2,
    replicateAll: true,
    killEveryMs: 1000,
    latencyMs: 300,
    lockDurationMs: 4000,
    stalledIntervalMs: 1000,
    enqueueSpreadMs: 15_000,
    timeoutMs: 70_000,
    log: (s) => t.diagnostic(s),
  });
  const summary = formatReport(report);
  console.log(`chaos summary:\n${summary}`);
  t.diagnostic(summary.replace(/\n/g, ' | '));

  assert.ok(report.kills > 0, 'the chaos loop never killed anything');
  assert.equal(report.restarts, report.kills);
  assertNothingLost(report);
});

// The interleavings a kill can cause but a random run hits only by luck, replayed in
// process: a plan or reflect job delivered again (its first process died before acking)
// after the goal has moved on must change nothing.
async function inProcess(): Promise<VfsTestRuntime & { job(queue: string, id: string): Promise<Job> }> {
  const t = vfsRuntime(redis.url);
  return Object.assign(t, {
    async job(queue: string, id: string) {
      const j = await t.rt.queues.get(queue).getJob(id);
      assert.ok(j, `job ${queue}/${id} not found`);
      return j;
    },
  });
}

/** Runs `hook` once, inside the first model call of the given kind (mid-job). */
function duringModelCall(rt: VfsTestRuntime['rt'], kind: string, hook: () => Promise<void>) {
  const inner = rt.provider;
  let fired = false;
  const wrapped: ModelProvider = {
    name: inner.name,
    async createMessage(req, ctx) {
      if (ctx.kind === kind && !fired) {
        fired = true;
        await hook();
      }
      return inner.createMessage(req, ctx);
    },
  };
  rt.provider = wrapped;
}

test('a plan job re-delivered while its cycle is being reflected on changes nothing', async () => {
  const t = await inProcess();
  try {
    const goalId = await t.newGoal('Re-delivered plan job');
    await t.rt.queues.addPlan({ goalId, step: 1 });
    const plan = await t.job(PLAN_QUEUE, planJobId(goalId, 1));
    assert.equal((await processPlanJob(t.rt, plan)).status, 'dispatched');
    // The cycle's reflection starts; while it asks the model, the plan job comes back.
    const stale: { status?: string } = {};
    duringModelCall(t.rt, 'reflector', async () => {
      Object.assign(stale, await processPlanJob(t.rt, plan));
    });
    const reflect = await t.job(REFLECT_QUEUE, reflectJobId(goalId, 1));
    const r = await processReflectJob(t.rt, reflect);
    assert.equal(r.decision, 'continue');
    assert.ok(stale.status, 'the stale plan job never ran');
    const g = (await t.rt.goals.get(goalId))!;
    assert.equal(g.status, 'queued', `the reflector's decision was lost: the goal is ${g.status}`);
    assert.ok(await t.rt.queues.get(PLAN_QUEUE).getJob(planJobId(goalId, 2)), 'the next cycle was never queued');
  } finally {
    await t.close();
  }
});

test('plan and reflect jobs of an earlier cycle, re-delivered late, leave the current cycle alone', async () => {
  const t = await inProcess();
  try {
    const goalId = await t.newGoal('Late re-deliveries');
    await t.rt.queues.addPlan({ goalId, step: 1 });
    const plan1 = await t.job(PLAN_QUEUE, planJobId(goalId, 1));
    await processPlanJob(t.rt, plan1);
    const reflect1 = await t.job(REFLECT_QUEUE, reflectJobId(goalId, 1));
    assert.equal((await processReflectJob(t.rt, reflect1)).decision, 'continue');
    const plan2 = await t.job(PLAN_QUEUE, planJobId(goalId, 2));
    assert.equal((await processPlanJob(t.rt, plan2)).status, 'dispatched');
    const before = (await t.rt.goals.get(goalId))!;
    assert.equal(before.status, 'running');
    assert.equal(before.step, 2);

    // Cycle 2 runs; the cycle-1 jobs come back from the stalled check.
    await processPlanJob(t.rt, plan1);
    await processReflectJob(t.rt, reflect1);
    const after = (await t.rt.goals.get(goalId))!;
    assert.equal(after.status, 'running', `a stale job moved the goal to ${after.status}`);
    assert.equal(after.step, 2);
    assert.equal(after.planStep, 2);
    assert.deepEqual(after.plan, before.plan, 'a stale plan job replaced the current plan');
    // And cycle 2's own reflection still takes effect.
    const reflect2 = await t.job(REFLECT_QUEUE, reflectJobId(goalId, 2));
    const decision = (await processReflectJob(t.rt, reflect2)).decision;
    const g = (await t.rt.goals.get(goalId))!;
    assert.equal(g.reflection?.step, 2, `cycle 2 was not reflected on (${decision})`);
    assert.notEqual(g.status, 'running');
  } finally {
    await t.close();
  }
});

test(
  'a plan job killed after the goal went running but before its flow was added ' + 'dispatches on re-delivery',
  async () => {
    const t = await inProcess();
    try {
      const goalId = await t.newGoal('Killed mid-dispatch');
      await t.rt.queues.addPlan({ goalId, step: 1 });
      const plan = await t.job(PLAN_QUEUE, planJobId(goalId, 1));
      await processPlanJob(t.rt, plan);
      // Undo the flow as if the process had died before adding it.
      const reflect = await t.job(REFLECT_QUEUE, reflectJobId(goalId, 1));
      await reflect.remove({ removeChildren: true });
      assert.equal(await t.rt.queues.get(REFLECT_QUEUE).getJob(reflectJobId(goalId, 1)), undefined);
      assert.equal((await t.rt.goals.get(goalId))!.status, 'running');

      assert.equal((await processPlanJob(t.rt, plan)).status, 'dispatched');
      assert.ok(
        await t.rt.queues.get(REFLECT_QUEUE).getJob(reflectJobId(goalId, 1)),
        'the flow was not dispatched again',
      );
      const ids = (await t.rt.queues.get(subagentQueueName('code-writer')).getJobs(['waiting'])).map((j) => j.id);
      assert.deepEqual(
        ids.filter((id) => id!.startsWith(goalId)),
        [`${goalId}:1:1`],
      );
    } finally {
      await t.close();
    }
  },
);
