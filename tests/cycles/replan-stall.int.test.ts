// Smarter cycles, across real processes (planner, reflector, a research worker) with the real
// SDK against the local Messages-API server: a replan keeps finished work (only the failed
// subtask runs again, done artifacts keep their version), a revision the reflection asks for
// makes a new version with the old one in the history, and three cycles without progress
// escalate with a `stalled` reason without asking the reflector's model a third time.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { type MessagesApiServer, startMessagesApiServer, text, toolUse } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { cycleOf, json, metricSum, requestsOf, research, scenarioHandler } from './harness.ts';

const REPLAN = '[replan]';
const REVISE = '[revise]';
const STALL = '[stall]';
const REVFAIL = '[revfail]';
const NOTHING = '[nothing]';
const PARTS = [1, 2, 3, 4, 5].map((i) => `part-${i}.md`);
const EMPTY_SUMMARY = 'output broke the summary contract twice: the summary is empty';

/** The artifacts a planner's task lists as failed in the last cycle (`- name (role): reason`). */
const failedIn = (task: string) => {
  const section = /^Failed in the last cycle[^\n]*\n((?:- .*\n?)*)/m.exec(task)?.[1] ?? '';
  return [...section.matchAll(/^- (\S+) \(/gm)].map((m) => m[1]!);
};
const toRevise = (task: string) => /^To revise[^:]*: (.*)$/m.exec(task)?.[1]?.split(', ') ?? [];

let part3Threads = 0;
let revisionRuns = 0;
const handler = scenarioHandler({
  // Five parts in parallel; part 3's first run answers empty twice (its contract fails). A
  // replanning model plans what the planner was told failed.
  [REPLAN]: (body, role, task) => {
    if (role === 'planner') {
      const names = task.includes('Prior plan: (none)') ? PARTS : failedIn(task);
      return json({ subtasks: names.map((n) => research(REPLAN, n)) });
    }
    if (role === 'reflector')
      return json(
        /: failed/.test(task) ? { decision: 'replan', reason: 'a part failed' } : { decision: 'end', reason: 'ok' },
      );
    if (!task.includes('write part-3.md')) return text(`Summary of ${/write (\S+)/.exec(task)?.[1]}`);
    if (body.messages.length === 1) part3Threads++;
    return text(part3Threads === 1 ? ' ' : 'Summary of part-3.md');
  },
  // Cycle 1 writes notes and facts; the reflection asks to revise notes. The planner first
  // re-plans both (rejected: facts is done), then only what the reflection named.
  [REVISE]: (body, role, task) => {
    if (role === 'planner') {
      if (task.includes('Prior plan: (none)'))
        return json({ subtasks: [research(REVISE, 'notes.md'), research(REVISE, 'facts.md')] });
      const names = body.messages.length === 1 ? ['notes.md', 'facts.md'] : toRevise(task);
      return json({ subtasks: names.map((n) => research(REVISE, n, { instruction: `${REVISE} rewrite ${n}` })) });
    }
    if (role === 'reflector')
      return json(
        cycleOf(task) === 1
          ? { decision: 'replan', reason: 'notes too thin', revise: ['notes.md'] }
          : { decision: 'end', reason: 'ok' },
      );
    return text(
      task.includes('rewrite notes.md') ? 'notes, second version' : `first version of ${/write (\S+)/.exec(task)?.[1]}`,
    );
  },
  // Cycle 2 revises notes: the run answers empty twice (its contract fails).
  [REVFAIL]: (body, role, task) => {
    if (role === 'planner') {
      const names = task.includes('Prior plan: (none)') ? ['notes.md'] : toRevise(task);
      return json({ subtasks: names.map((n) => research(REVFAIL, n, { instruction: `${REVFAIL} rewrite ${n}` })) });
    }
    if (role === 'reflector')
      return json(
        cycleOf(task) === 1
          ? { decision: 'replan', reason: 'notes too thin', revise: ['notes.md'] }
          : { decision: 'end', reason: 'enough' },
      );
    if (body.messages.length === 1) revisionRuns++;
    if (revisionRuns === 1) return text('notes, the good version');
    return text(' ');
  },
  // The only subtask answers empty (its contract fails twice); the reflection ends anyway.
  [NOTHING]: (_body, role) => {
    if (role === 'planner') return json({ subtasks: [research(NOTHING, 'answer.md')] });
    if (role === 'reflector') return json({ decision: 'end', reason: 'nothing more to do' });
    return text(' ');
  },
  // The same plan every cycle; the subtask looks at the files, then answers empty, every time.
  [STALL]: (body, role) => {
    if (role === 'planner') return json({ subtasks: [research(STALL, 'flaky.md')] });
    if (role === 'reflector') return json({ decision: 'replan', reason: 'try again' });
    return body.messages.length === 1 ? toolUse('list_files', {}) : text(' ');
  },
});

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler });
  fleet = await startFleet(redis.url, anthropicEnv(server), { roles: ['research-specialist'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

test('a replan after 1 of 5 subtasks failed dispatches only that one; the done ones keep their version', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${REPLAN} Write five parts` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  const dispatched = events.flatMap((e) => (e.type === 'dispatched' && !e.redelivered ? [e.subtasks] : []));
  assert.deepEqual(
    dispatched.map((subtasks) => subtasks.map((s) => s.artifact)),
    [PARTS, ['part-3.md']],
  );
  console.log(`# measured: after 1 of 5 subtasks failed, the next cycle dispatched ${dispatched[1]!.length}`);

  // The planner was told what is done (to keep) and what failed, with the reason.
  const cycle2 = requestsOf(server, REPLAN, 'planner').map((r) => r.body.messages[0]!.content as string)[1]!;
  for (const n of [1, 2, 4, 5]) assert.match(cycle2, new RegExp(`^- part-${n}\\.md \\[done, \\d+ bytes\\]$`, 'm'));
  assert.doesNotMatch(cycle2, /part-3\.md \[done/);
  assert.match(cycle2, /^Finished work \(marked done above\): keep it, do not plan it again\.$/m);
  assert.match(cycle2, new RegExp(`^- part-3\\.md \\(research-specialist\\): ${EMPTY_SUMMARY}$`, 'm'));

  const files = Object.fromEntries((await fleet.client.vfs.index(goalId)).map((f) => [f.name, f]));
  for (const name of ['part-1.md', 'part-2.md', 'part-4.md', 'part-5.md']) {
    assert.deepEqual([files[name]!.status, files[name]!.version, files[name]!.step], ['done', 1, 1], name);
  }
  assert.deepEqual([files['part-3.md']!.status, files['part-3.md']!.step], ['done', 2]);
  // The done parts' subagents ran once: no second conversation was started for them.
  const part1Runs = requestsOf(server, 'write part-1.md', 'research').filter((r) => r.body.messages.length === 1);
  assert.equal(part1Runs.length, 1);
});

test('a revision the reflection asks for is a new version, the old one kept in the history', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${REVISE} Notes and facts` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  // Cycle 2's first plan re-planned done work too: rejected, naming it, then planned again.
  const planner = requestsOf(server, REVISE, 'planner');
  const reminder = JSON.stringify(planner.find((r) => r.body.messages.length === 3)?.body.messages[2]);
  assert.match(reminder, /\\"facts\.md\\" is done: finished work is kept/);
  assert.doesNotMatch(reminder, /notes\.md\\" is done/, 'the revision asked for is allowed');

  const files = Object.fromEntries((await fleet.client.vfs.index(goalId)).map((f) => [f.name, f]));
  assert.equal(files['facts.md']!.version, 1);
  assert.equal(files['notes.md']!.version, 2);
  assert.equal(await fleet.client.read(goalId, 'notes.md'), 'notes, second version');
  const history = await fleet.client.vfs.history(goalId, 'notes.md');
  assert.deepEqual(
    history.map((h) => [h.version, h.status, h.content]),
    [[1, 'done', 'first version of notes.md']],
  );
});

test('a revision that fails leaves the done version current', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${REVFAIL} Notes` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  assert.ok(events.some((e) => e.type === 'subtask_failed' && e.step === 2 && e.artifact === 'notes.md'));
  const [notes] = (await fleet.client.vfs.index(goalId)).filter((f) => f.name === 'notes.md');
  assert.deepEqual([notes!.status, notes!.step], ['done', 1]);
  assert.equal(await fleet.client.read(goalId, 'notes.md'), 'notes, the good version');
  assert.deepEqual(await fleet.client.vfs.history(goalId, 'notes.md'), []);
});

test('an end when no subtask finished and no artifact is done escalates instead of ending done', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${NOTHING} Answer the question` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.pausedFor, 'escalation');
  assert.equal(
    g.reason,
    'no subtask finished and no artifact is done: a human must decide (the reflector would end: nothing more to do)',
  );
  const reflected = (await fleet.client.goals.events(goalId)).map((e) => e.event).filter((e) => e.type === 'reflected');
  assert.deepEqual(
    reflected.map((e) => e.decision),
    ['escalate'],
  );
  // The human may still end it.
  const ended = await runCli(['resume', goalId, '--end'], fleet.env);
  assert.equal(ended.code, 0, ended.stderr);
  assert.equal((await fleet.client.get(goalId)).status, 'done');
});

test('three cycles without progress escalate as stalled, without a third call to the reflector model', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${STALL} Keep failing` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.pausedFor, 'escalation');
  assert.equal(
    g.reason,
    `stalled: 3 cycles without progress (cycles 1-3): no subtask finished; the same failure 3×: "${EMPTY_SUMMARY}"; ` +
      'the same plan 3×',
  );
  assert.equal(requestsOf(server, STALL, 'reflector').length, 2, 'the model was asked after cycles 1 and 2 only');
  assert.equal(requestsOf(server, STALL, 'planner').length, 3, 'no fourth cycle was planned');
  const stalled = (await fleet.client.goals.events(goalId)).map((e) => e.event).filter((e) => e.type === 'stalled');
  assert.deepEqual(
    stalled.map((e) => [e.step, e.action, e.cycles]),
    [[3, 'escalate', 3]],
  );
  assert.equal(await metricSum(fleet, 'deepq_stalls_total', { action: 'escalate' }), 1);

  // Shown by status and watch.
  const status = await runCli(['status', goalId], fleet.env);
  assert.match(status.stdout, /^status {4}awaiting_human \(stalled: 3 cycles without progress/m);
  assert.match(status.stdout, /^stalled {3}the reflector stopped asking the model; cycles 1: 0 done, 1 failed; 2: /m);
  const watch = await runCli(['watch', goalId], fleet.env);
  assert.match(watch.stdout, /cycle 3 STALLED, escalating without asking the model: stalled: 3 cycles/);

  // A human's resume starts the count afresh.
  const resumed = await runCli(['resume', goalId], fleet.env);
  assert.equal(resumed.code, 0, resumed.stderr);
  // (The resumed goal may already have run cycle 4: only cycles after the resume count.)
  const progress = (await fleet.client.get(goalId)).progress;
  assert.ok(
    progress.every((p) => p.step > 3),
    JSON.stringify(progress),
  );
  await fleet.client.cancel(goalId);
});

test('with stall.action fail and stall.cycles 2, two cycles without progress end the goal failed', async () => {
  const env = { ...anthropicEnv(server), DEEPQ_STALL_CYCLES: '2', DEEPQ_STALL_ACTION: 'fail' };
  const strict = await startFleet(redis.url, env, { roles: ['research-specialist'] });
  try {
    const goalId = await strict.client.enqueue({ goal: `${STALL} Fail when stuck` });
    const g = await strict.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.equal(g.status, 'failed');
    assert.match(g.reason ?? '', /^stalled: 2 cycles without progress \(cycles 1-2\): no subtask finished; /);
    assert.equal(requestsOf(server, 'Fail when stuck', 'reflector').length, 1, 'asked after cycle 1 only');
    assert.equal(requestsOf(server, 'Fail when stuck', 'planner').length, 2, 'no third cycle');
    const events = (await strict.client.goals.events(goalId)).map((e) => e.event);
    const stalled = events.filter((e) => e.type === 'stalled');
    assert.deepEqual(
      stalled.map((e) => [e.step, e.action, e.cycles]),
      [[2, 'fail', 2]],
    );
    // The loop ended: the record says end, not escalate (nobody is asked).
    const reflected = events.filter((e) => e.type === 'reflected').at(-1);
    assert.equal(reflected?.type === 'reflected' && reflected.decision, 'end');
    assert.equal(await metricSum(strict, 'deepq_stalls_total', { action: 'fail' }), 1);
    assert.equal(await metricSum(strict, 'deepq_stalls_total', { action: 'escalate' }), 0);
  } finally {
    await strict.stop();
  }
});
