// Two humans answer one escalation at once with a file of the same name (the inspector sends
// concurrent resumes from one process): one wins, the other is refused, and the file the
// winner's re-plan reads is the winner's. The refused one's file went in before its move was
// refused, and was current under the winner's plan in 20 of 20 runs. Real Redis and BullMQ.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { useRedis } from '../../testing/redis.ts';
import { reflectToHuman, useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

test('of two resumes with files at once, the winner files are the ones its re-plan reads', async (tc) => {
  const client = new GoalClient(t.rt.cfg);
  tc.after(() => client.close());
  for (let i = 0; i < 5; i++) {
    const goalId = await t.newGoal();
    assert.ok(await reflectToHuman(t.rt, goalId, 'escalate', 'escalation'));
    const by = (who: string) =>
      client.resume(goalId, { note: `from ${who}`, files: [{ name: 'spec.md', content: `${who}\n` }] }).then(
        () => ({ who, won: true, why: '' }),
        (err: Error) => ({ who, won: false, why: err.message }),
      );
    const results = await Promise.all([by('A'), by('B')]);
    const winners = results.filter((r) => r.won);
    assert.equal(winners.length, 1, JSON.stringify(results));
    const loser = results.find((r) => !r.won)!;
    assert.match(loser.why, /not awaiting_human: nothing to resume/);
    assert.equal((await client.get(goalId)).note, `from ${winners[0]!.who}`);
    assert.equal(await client.read(goalId, 'spec.md'), `${winners[0]!.who}\n`);
    assert.equal((await t.rt.vfs.history(goalId, 'spec.md')).length, 0, 'the refused resume stored nothing');
  }
});
