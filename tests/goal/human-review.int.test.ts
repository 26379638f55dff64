// The human boundary: escalation (by the model or at max depth) and --review pause the goal
// in awaiting_human; `deepq resume` carries on, with or without a note.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadTranscript } from '../../shared/agent/transcripts.ts';
import { type Fleet, metricSum, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let fleet: Fleet;
before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { DEEPQ_MAX_DEPTH: '1' });
});
after(async () => fleet?.stop());

test('--review pauses after every reflection; resume applies the decision each time', async () => {
  const reviewFleet = await startFleet(redis.url);
  try {
    const c = reviewFleet.client;
    const goalId = await c.enqueue({ goal: 'Reviewed goal', review: true });
    let g = await c.waitFor(goalId, { timeoutMs: 20_000 });
    assert.equal(g.status, 'awaiting_human');
    assert.equal(g.pausedFor, 'review');
    assert.equal(g.reflection!.decision, 'continue');
    assert.equal(g.step, 1);

    let r = await runCli(['resume', goalId], reviewFleet.env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /continue/);
    g = await c.waitFor(goalId, { timeoutMs: 20_000 });
    assert.equal(g.status, 'awaiting_human', 'the goal did not pause after the second reflection');
    assert.equal(g.step, 2);
    assert.equal(g.reflection!.decision, 'end');

    r = await runCli(['resume', goalId], reviewFleet.env);
    assert.match(r.stdout, /end \(status done\)/);
    assert.equal((await c.get(goalId)).status, 'done');
    // Ended by the CLI, counted by the reflector (the CLI keeps no metrics): once.
    const done = () => metricSum(reviewFleet, 'deepq_goals_total', { status: 'done' });
    for (let i = 0; i < 50 && (await done()) === 0; i++) await new Promise((res) => setTimeout(res, 100));
    assert.equal(await done(), 1);
    const types = (await c.goals.events(goalId)).map((e) => e.event.type);
    assert.deepEqual(
      types.filter((t) => t === 'paused' || t === 'resumed'),
      ['paused', 'resumed', 'paused', 'resumed'],
    );
  } finally {
    await reviewFleet.stop();
  }
});

test('at max depth a reflector that would go on escalates; a resume grants that many more, and end ends', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Deep goal' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 20_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.pausedFor, 'escalation');
  // The scripted reflector continues after cycle 1 (the code is not reviewed yet).
  assert.match(
    g.reason!,
    /^max depth 1 reached after 1 cycle\(s\): a human must decide \(the reflector would continue: /,
  );
  const reflected = (await fleet.client.goals.events(goalId)).map((e) => e.event).find((e) => e.type === 'reflected')!;
  assert.equal(reflected.decision, 'escalate');
  assert.ok(reflected.threadId, 'the reflector model was not asked at max depth');

  // Resume after an escalation re-plans; with a note, the note reaches the planner.
  const r = await runCli(['resume', goalId, '--note', 'Focus on edge cases please'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /replan with note/);
  const g2 = await fleet.client.waitFor(goalId, { timeoutMs: 20_000 });
  // The resume granted max depth more cycles (1 here): cycle 2's reflector ends the finished goal.
  assert.equal(g2.step, 2);
  assert.equal(g2.status, 'done', g2.reason ?? '');
  assert.equal(g2.reflection!.decision, 'end');
  assert.equal(g2.depth, 1);
  const planned = (await fleet.client.goals.events(goalId)).map((e) => e.event).filter((e) => e.type === 'planned');
  assert.equal(planned.length, 2);
  const t = await loadTranscript({ redis: redis.client, goals: fleet.client.goals }, String(planned[1]!.threadId));
  assert.match(JSON.stringify(t!.messages[0]), /Note from a human: Focus on edge cases please/);
  const t1 = await loadTranscript({ redis: redis.client, goals: fleet.client.goals }, String(planned[0]!.threadId));
  assert.doesNotMatch(JSON.stringify(t1!.messages[0]), /Note from a human/);
});

test('resume --end: a human ends an escalated goal as done; refused with a note or on a goal not waiting', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Deep goal ended by hand' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 20_000 });
  assert.equal(g.pausedFor, 'escalation');
  let r = await runCli(['resume', goalId, '--end', '--note', 'x'], fleet.env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /--end ends the goal: it takes no --note, --file nor a raised budget/);
  assert.equal((await fleet.client.get(goalId)).status, 'awaiting_human', 'a refused --end changed the goal');
  r = await runCli(['resume', goalId, '--end'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`resumed ${goalId}: end \\(status done\\)`));
  const done = await fleet.client.get(goalId);
  assert.equal(done.status, 'done');
  assert.equal(done.reason, 'ended as done by a human', "the escalation's reason is over");
  assert.equal(done.step, 1, 'a cycle ran after the end');
  const types = (await fleet.client.goals.events(goalId)).map((e) => e.event.type);
  assert.deepEqual(types.slice(-3), ['paused', 'resumed', 'finished']);
  r = await runCli(['resume', goalId, '--end'], fleet.env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`goal ${goalId} is done, not awaiting_human: nothing to end`));
});

test('resume refuses a goal that is not awaiting a human, naming its status', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'Deep goal 2' });
  await fleet.client.waitFor(goalId, { timeoutMs: 20_000 });
  await fleet.client.cancel(goalId);
  const r = await runCli(['resume', goalId], fleet.env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`goal ${goalId} is cancelled, not awaiting_human`));
});
