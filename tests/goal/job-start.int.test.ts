// A job's start reads its goal in the same script as its first write: the plan and reflect jobs'
// moves (with a guard on the goal's cycle that refuses stale deliveries and returns the goal
// as it was), and a subtask's read of its goal with its `subtask_started` event.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newGoalId } from '../../shared/goal/ids.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

const plan = {
  subtasks: [{ role: 'critic', instruction: 'review it', expected_artifact: 'review.md', read_files: [] }],
};

/** A goal planned and dispatched for cycle 1, now `running`. */
async function runningAtCycle1(): Promise<string> {
  const goalId = await t.newGoal('a goal at its first cycle');
  assert.equal((await t.rt.lifecycle.planJobStart(goalId, 1))?.moved, true);
  assert.ok(await t.rt.lifecycle.dispatch(goalId, 1, plan));
  return goalId;
}

const status = async (goalId: string) => (await t.rt.goals.get(goalId))!.status;

test('a plan job moves its goal into planning and reads it as it was, files index with it', async () => {
  const goalId = await t.newGoal('read with the move');
  await t.rt.vfs.write(goalId, 'notes.md', 'n', { status: 'done', step: 0, writer: 'w' });
  const start = (await t.rt.lifecycle.planJobStart(goalId, 1))!;
  assert.equal(start.moved, true);
  assert.equal(start.goal.status, 'queued', 'the goal as it was before the move');
  assert.equal(start.goal.goal, 'read with the move');
  assert.equal(start.files?.[0], 'notes.md');
  assert.equal(await status(goalId), 'planning');
});

test('a stale plan job (its cycle dispatched, or the goal queued for the next one) moves nothing', async () => {
  const goalId = await runningAtCycle1();
  const again = (await t.rt.lifecycle.planJobStart(goalId, 1))!;
  assert.equal(again.moved, false);
  assert.equal(again.goal.status, 'running');
  assert.equal(again.goal.planStep, 1, 'the refused start still returns the goal');
  // The reflection chose another cycle: the goal is queued again, at step 1.
  assert.equal((await t.rt.lifecycle.reflectJobStart(goalId, 1))?.moved, true);
  const reflection = { decision: 'continue' as const, reason: 'more to do' };
  assert.ok(await t.rt.lifecycle.requeue(goalId, { step: 1, reflection, outcomes: [] }));
  const stale = (await t.rt.lifecycle.planJobStart(goalId, 1))!;
  assert.equal(stale.moved, false, 'a re-delivered cycle-1 plan job must not take the queued goal');
  assert.equal(await status(goalId), 'queued');
  assert.equal((await t.rt.lifecycle.planJobStart(goalId, 2))?.moved, true, "the next cycle's job moves it");
  assert.equal(await status(goalId), 'planning');
});

test('a reflect job moves only a goal at its cycle; a goal that is gone reads as null', async () => {
  const goalId = await runningAtCycle1();
  const wrong = (await t.rt.lifecycle.reflectJobStart(goalId, 2))!;
  assert.equal(wrong.moved, false);
  assert.equal(await status(goalId), 'running');
  const right = (await t.rt.lifecycle.reflectJobStart(goalId, 1))!;
  assert.equal(right.moved, true);
  assert.equal(right.goal.status, 'running');
  assert.deepEqual(right.files, [], 'no files yet, read with the move');
  assert.equal(await status(goalId), 'reflecting');
  assert.equal(await t.rt.lifecycle.planJobStart(newGoalId(), 1), null);
  assert.equal(await t.rt.lifecycle.reflectJobStart(newGoalId(), 1), null);
});

test("a subtask's start appends subtask_started only for a goal that goes on", async () => {
  const started = { type: 'subtask_started', step: 1, index: 0, role: 'critic', artifact: 'review.md' } as const;
  const event = { ...started, threadId: 'goal-x--critic-0000abcd', attempt: 1 };
  const count = async (goalId: string) =>
    (await t.rt.goals.events(goalId)).filter((e) => e.event.type === 'subtask_started').length;
  const goalId = await runningAtCycle1();
  const brief = (await t.rt.goals.startSubtask(goalId, event))!;
  assert.deepEqual([brief.status, brief.goal], ['running', 'a goal at its first cycle']);
  assert.equal(await count(goalId), 1);
  // Waiting at a budget: the job parks, and no start is recorded.
  const hit = { kind: 'tokens' as const, reason: 'token budget exceeded' };
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, hit, 1));
  assert.equal((await t.rt.goals.startSubtask(goalId, event))!.pausedFor, 'budget');
  assert.ok(await t.rt.lifecycle.cancel(goalId, 1));
  assert.equal((await t.rt.goals.startSubtask(goalId, event))!.status, 'cancelled');
  assert.equal(await count(goalId), 1, 'a start was recorded for a goal that does not go on');
  assert.equal(await t.rt.goals.startSubtask(newGoalId(), event), null);
  assert.equal(await redis.client.exists(t.rt.goals.keys.events(newGoalId())), 0);
});

/** A decision of cycle `step` as the reflector makes it. */
const decided = (step: number, decision: 'continue' | 'end' | 'escalate') => ({
  step,
  reflection: { decision, reason: `cycle ${step} says ${decision}` },
  outcomes: [{ index: 0, status: 'done' as const }],
});

test("a late decision or dispatch of an earlier cycle's job (its lock ran out in its call) moves nothing", async () => {
  const lc = t.rt.lifecycle;
  const goalId = await runningAtCycle1();
  // Cycle 1's reflect job, delivered twice: the first delivery's call outlives its lock, the
  // second (another replica) decides, and the goal goes on to reflect cycle 2.
  assert.equal((await lc.reflectJobStart(goalId, 1))?.moved, true);
  assert.ok(await lc.requeue(goalId, decided(1, 'continue')));
  assert.equal((await lc.planJobStart(goalId, 2))?.moved, true);
  // Cycle 1's plan job, back late: its dispatch would take the goal back to cycle 1.
  assert.equal(await lc.dispatch(goalId, 1, plan), false);
  assert.ok(await lc.dispatch(goalId, 2, plan));
  assert.equal((await lc.reflectJobStart(goalId, 2))?.moved, true);
  // The first delivery of cycle 1's reflection comes back while cycle 2 reflects.
  for (const decision of ['continue', 'end', 'escalate'] as const) {
    const late = decided(1, decision);
    const moved =
      decision === 'continue'
        ? lc.requeue(goalId, late)
        : decision === 'end'
          ? lc.complete(goalId, late)
          : lc.awaitHuman(goalId, late, 'escalation');
    assert.equal(await moved, false, `cycle 1's ${decision} landed in cycle 2`);
  }
  assert.equal(
    await lc.failStalled(goalId, { ...decided(1, 'continue'), stalled: { reason: 'x', cycles: 3, action: 'fail' } }),
    false,
  );
  const g = (await t.rt.goals.get(goalId))!;
  assert.deepEqual([g.status, g.step, g.planStep], ['reflecting', 2, 2]);
  assert.ok(await lc.complete(goalId, decided(2, 'end')), "cycle 2's own decision");
  assert.equal(await status(goalId), 'done');
});
