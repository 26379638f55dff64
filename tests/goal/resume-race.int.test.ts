// `resume` checks what its transition really did: a goal cancelled while a reviewed `end` is
// being confirmed is reported as cancelled, and never also gets a "finished done" event.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalClient } from '../../cli/goal-client.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsClient, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
let client: GoalClient;
useVfsClient(redis, (x, c) => {
  t = x;
  client = c;
});

/** A goal paused for review after a reflection that chose `end`, through the real transitions. */
async function reviewedEnd(): Promise<string> {
  const goalId = await t.newGoal('reviewed');
  assert.ok(await reflectToHuman(t.rt, goalId, 'end', 'review'));
  return goalId;
}

test('resume and cancel racing on a reviewed end: one wins, and the record says which', async () => {
  let raced = 0;
  for (let i = 0; i < 20; i++) {
    const goalId = await reviewedEnd();
    // Either call may go first: both read the goal, then both try their transition.
    const resume = () => client.resume(goalId).catch((e: Error) => e);
    const cancelFirst = i % 2 === 1;
    const early = cancelFirst ? client.cancel(goalId) : resume();
    const late = cancelFirst ? resume() : client.cancel(goalId);
    const [a, b] = await Promise.all([early, late]);
    const [resumed, cancelled] = (cancelFirst ? [b, a] : [a, b]) as [
      Awaited<ReturnType<typeof resume>>,
      Awaited<ReturnType<GoalClient['cancel']>>,
    ];
    const g = await client.get(goalId);
    const finished = (await client.goals.events(goalId)).filter((e) => e.event.type === 'finished');
    assert.equal(finished.length, 1, `one finished event, not ${finished.length}`);
    if (resumed instanceof Error) {
      raced++;
      assert.equal(g.status, 'cancelled');
      assert.match(resumed.message, /cancelled/);
    } else {
      assert.equal(g.status, resumed.status);
      assert.equal(cancelled.cancelled, g.status === 'cancelled');
    }
  }
  assert.ok(raced > 0, 'the cancel never won: the race was not exercised');
});

test('a resume answers the pause it read: after another resume and a new pause, it is refused', async () => {
  const goalId = await t.newGoal('paused twice');
  assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
  // What a second human read, before the first one's resume.
  const stale = await client.get(goalId);
  assert.equal((await client.resume(goalId)).status, 'queued');
  assert.ok(await t.rt.lifecycle.pauseForBudget(goalId, { kind: 'tokens', reason: 'tokens ran out' }, 1));
  const paused = await client.get(goalId);
  assert.equal(paused.pauses, stale.pauses + 1);

  // The second human's answers, each from the stale read (as if read just before the first resume).
  const fresh = client.get.bind(client);
  client.get = async () => stale;
  try {
    await assert.rejects(client.resume(goalId), /paused again for budget .*not resumed/);
    await assert.rejects(client.endAsDone(goalId), /paused again for budget .*not resumed/);
  } finally {
    client.get = fresh;
  }
  const g = await client.get(goalId);
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.pausedFor, 'budget');
  const resumed = (await client.goals.events(goalId)).filter((e) => e.event.type === 'resumed');
  assert.equal(resumed.length, 1, 'only the first resume landed');
  // The budget pause itself is answered as usual.
  const r = await client.resume(goalId, { raise: { maxTokens: 1_000_000 } });
  assert.equal(r.action, 'raise budget');
});
