// Hand-offs that a dead process (or a lost reply) left half done are repaired: the reconciler
// adds a goal's missing next job; a time budget ends a goal mid-cycle; a goal awaiting a human
// past its retention ends with a reason instead of its keys expiring under it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { raisedBudgets } from '../../cli/goal-client.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { parkedQueue } from '../../shared/goal/parking.ts';
import { type Fleet, metricSum, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();
let fleet: Fleet;
before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, {
    DEEPQ_RECONCILE_INTERVAL_SECONDS: '1',
    DEEPQ_RECONCILE_GRACE_SECONDS: '1',
    DEEPQ_AWAITING_RETENTION_SECONDS: '2',
  });
});
after(async () => fleet?.stop());

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const body = await (await fetch(`http://127.0.0.1:${fleet.ports.get('reflector')}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = body.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('the reflector exports its repair and stall counters at 0 from its start', async () => {
  // A series first seen at 1 hides that step from increase(): the alerts on them undercounted.
  const body = await (await fetch(`http://127.0.0.1:${fleet.ports.get('reflector')}/metrics`)).text();
  for (const status of ['queued', 'planning', 'running', 'reflecting'])
    assert.match(body, new RegExp(`^deepq_reconciled_total\\{[^}]*from_status="${status}"[^}]*\\} 0$`, 'm'));
  for (const action of ['escalate', 'fail'])
    assert.match(body, new RegExp(`^deepq_stalls_total\\{[^}]*action="${action}"[^}]*\\} 0$`, 'm'));
});

test('a queued goal whose plan job is missing is repaired and runs to done', async () => {
  const c = fleet.client;
  // What `enqueue` leaves when it dies between storing the goal and adding its plan job.
  const goalId = newGoalId();
  await c.goals.create(goalId, 'A goal whose plan job was lost', {}, false);
  const g = await c.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done');
  assert.ok((await metric('deepq_reconciled_total', { from_status: 'queued' })) >= 1);
});

test('a goal whose plan job was deleted by hand after a resume is repaired', async () => {
  const c = fleet.client;
  const goalId = await c.enqueue({ goal: 'Reviewed, then its next plan job is lost', review: true });
  let g = await c.waitFor(goalId, { timeoutMs: 20_000 });
  assert.equal(g.status, 'awaiting_human');
  await c.resume(goalId);
  // Remove the plan job the resume added (as if the CLI died before adding it).
  const plan = c.queues.get('plan');
  const job = (await plan.getJobs(['waiting', 'delayed', 'prioritized', 'active'])).find(
    (j) => j.data.goalId === goalId,
  );
  // The planner may take it between the read and the remove (a CI run lost that race): then the
  // cycle runs without a repair, to the same end.
  const takenMeanwhile = (e: Error) => {
    if (!/locked by another worker/.test(e.message)) throw e;
  };
  if (job && (await job.getState()) !== 'active') await job.remove().catch(takenMeanwhile);
  g = await c.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'awaiting_human', 'the second cycle ran and paused for review again');
  assert.equal(g.step, 2);
});

test('the time budget ends a goal mid-cycle, aborting its running subtasks', async () => {
  const slow = await startFleet(
    redis.url,
    { DEEPQ_SCRIPTED_LATENCY_MS: '3000' },
    { roles: ['research-specialist', 'code-writer', 'critic'] },
  );
  try {
    const c = slow.client;
    const goalId = await c.enqueue({ goal: 'Too slow for its budget', budgets: { maxSeconds: 4 } });
    const g = await c.waitFor(goalId, { timeoutMs: 30_000 });
    assert.equal(g.status, 'budget_exceeded');
    assert.match(g.reason ?? '', /time budget exceeded/);
    // Planning takes ~3 s and each subtask call 3 s: without mid-cycle enforcement the goal
    // would end only when the next cycle is planned, after ~12 s.
    const ms = g.finishedAt! - g.createdAt;
    assert.ok(ms < 7000, `ended ${ms} ms after creation`);
    const events = (await c.goals.events(goalId)).map((e) => e.event);
    assert.ok(!events.some((e) => e.type === 'subtask_finished' && e.artifact === 'solution.py'));
  } finally {
    await slow.stop();
  }
});

test('jobs parked at a budget wake when the resume that raised it died before waking them', async () => {
  const slow = await startFleet(
    redis.url,
    { DEEPQ_SCRIPTED_LATENCY_MS: '1500', DEEPQ_RECONCILE_INTERVAL_SECONDS: '1', DEEPQ_RECONCILE_GRACE_SECONDS: '1' },
    { roles: ['research-specialist', 'code-writer', 'critic'] },
  );
  try {
    const c = slow.client;
    const goalId = await c.enqueue({ goal: 'Paused at its deadline', budgets: { maxSeconds: 2, onBudget: 'pause' } });
    let g = await c.waitFor(goalId, { timeoutMs: 30_000 });
    assert.equal(g.status, 'awaiting_human');
    // Every job of the goal parked (delayed), none still parking or yet to start: one that reads
    // the goal after the resume lands wakes itself, and the goal would finish without the reconciler.
    const parkedAll = async () => {
      const parked = Object.entries(await redis.client.hgetall(c.goals.keys.parked(goalId)));
      const states = await Promise.all(
        parked.map(async ([id, entry]) => (await c.queues.get(parkedQueue(entry)).getJob(id))?.getState()),
      );
      const running = await Promise.all(
        c.queues.allNames().map(async (q) => await c.queues.get(q).getJobs(['active', 'waiting', 'prioritized'])),
      );
      const unparked = running.flat().filter((j) => j.data.goalId === goalId);
      return parked.length > 0 && states.every((st) => st === 'delayed') && unparked.length === 0;
    };
    // A job that just parked reads its goal once more after the move (a resume landing then is
    // one it wakes for itself): on a loaded machine that read can come well after the move, so
    // the state must hold a while, or the resume below races it and no reconciler is needed.
    const parkedAndSettled = async () => {
      if (!(await parkedAll())) return false;
      await new Promise((r) => setTimeout(r, 1500));
      return parkedAll();
    };
    await until(parkedAndSettled, 30_000, 'every job parked for 1.5 s');
    // What `deepq resume --max-seconds 60` does first; it dies before waking the parked jobs.
    const budgets = raisedBudgets(g, { maxSeconds: 60 });
    const resume = { step: g.step, to: g.pausedFrom!, budgets, raised: { maxSeconds: 60 } };
    assert.ok(await c.lifecycle.resumeFromBudget(goalId, resume));
    g = await c.waitFor(goalId, { timeoutMs: 40_000 });
    assert.equal(g.status, 'done', `${g.status}: ${g.reason}`);
    assert.ok((await metricSum(slow, 'deepq_reconciled_total')) >= 1);
  } finally {
    await slow.stop();
  }
});

test('a goal awaiting a human past its retention ends with the reason and keeps its artifacts', async () => {
  const depth1 = await startFleet(redis.url, {
    DEEPQ_MAX_DEPTH: '1',
    DEEPQ_RECONCILE_INTERVAL_SECONDS: '1',
    DEEPQ_RECONCILE_GRACE_SECONDS: '1',
    DEEPQ_AWAITING_RETENTION_SECONDS: '2',
  });
  try {
    const c = depth1.client;
    const goalId = await c.enqueue({ goal: 'Escalated and then forgotten' });
    const paused = await c.waitFor(goalId, { timeoutMs: 20_000 });
    assert.equal(paused.status, 'awaiting_human');
    assert.equal(await c.redis.ttl(c.goals.keys.goal(goalId)), -1, 'no TTL while a human decides');
    const g = await c.waitFor(goalId, { timeoutMs: 20_000, stopOnPause: false });
    assert.equal(g.status, 'cancelled');
    assert.match(g.reason ?? '', /awaitingRetentionSeconds/);
    assert.ok((await c.artifacts(goalId)).length > 0, 'the artifacts stay until the TTL sweep');
    // Counted once: a `deepq cancel` afterwards (its message reaches the reflector) adds nothing.
    const cancelled = () => metricSum(depth1, 'deepq_goals_total', { status: 'cancelled' });
    assert.equal(await cancelled(), 1);
    const r = await runCli(['cancel', goalId], depth1.env);
    assert.match(r.stdout, /already cancelled/);
    await new Promise((res) => setTimeout(res, 1500));
    assert.equal(await cancelled(), 1);
  } finally {
    await depth1.stop();
  }
});
