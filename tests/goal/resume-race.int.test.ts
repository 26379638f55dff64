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
