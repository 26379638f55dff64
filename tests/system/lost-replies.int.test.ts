// Every hand-off survives a lost reply. The services and the client talk to Redis through a
// fault proxy that drops the reply to one chosen call and cuts that connection: ioredis then
// re-sends the call (the script runs twice) or fails it (the job is retried). Either way the
// goal ends as it should, with no step taken twice.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { type FaultProxy, type ProxiedCommand, startFaultProxy } from '../../testing/fault-proxy.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let proxy: FaultProxy;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  proxy = await startFaultProxy({ host: '127.0.0.1', port: redis.server.port });
  // The reconciler's grace is far longer than the tests: the hand-offs must hold by themselves.
  fleet = await startFleet(proxy.url, { DEEPQ_RECONCILE_GRACE_SECONDS: '600' });
});
after(async () => {
  await fleet?.stop();
  await proxy?.close();
});

const isScript = (c: ProxiedCommand) => c.name === 'EVALSHA' || c.name === 'EVAL';
/** goalTransition's arguments: script, 10, ten keys (the goal hash first), then from and to. */
const transition = (from: string, to: string) => (c: ProxiedCommand) =>
  isScript(c) &&
  c.args[1] === '10' &&
  /:goal:[a-z0-9]+$/.test(c.args[2] ?? '') &&
  c.args[12] === from &&
  c.args[13] === to;
/** vfsWrite's: script, 10, the files hash first; a subtask's artifact carries its event and transcript. */
const artifactWrite = (c: ProxiedCommand) =>
  isScript(c) && c.args[1] === '10' && (c.args[2] ?? '').endsWith(':files') && (c.args[23] ?? '') !== '';
/** subtaskStart's: script, 2, the goal hash and its events, then the `subtask_started` event. */
const subtaskStart = (c: ProxiedCommand) =>
  isScript(c) &&
  c.args[1] === '2' &&
  (c.args[3] ?? '').endsWith(':events') &&
  /"subtask_started"/.test(c.args[4] ?? '');
/** goalCreate's: script, 4, the goal hash, its events, the goals index, the live goals. */
const creation = (c: ProxiedCommand) => isScript(c) && c.args[1] === '4' && (c.args[4] ?? '').endsWith(':goals');

/** Each cycle dispatched, reflected and each subtask finished once; one end. */
function assertNoStepTwice(events: TimelineEvent[]): void {
  const count = (key: string) => events.filter((e) => `${e.type}:${'step' in e ? e.step : ''}` === key).length;
  for (const e of events) {
    if (e.type === 'dispatched' && !e.redelivered)
      assert.equal(count(`dispatched:${e.step}`), 1, `dispatched ${e.step}`);
    if (e.type === 'reflected') assert.equal(count(`reflected:${e.step}`), 1, `reflected ${e.step}`);
  }
  const runs = events.flatMap((e) => (e.type === 'subtask_started' ? [e.threadId] : []));
  assert.equal(new Set(runs).size, runs.length, `a run started twice: ${runs}`);
  const finished = events.filter((e) => e.type === 'subtask_finished').map((e) => `${e.step}:${e.index}`);
  assert.equal(new Set(finished).size, finished.length, `a subtask finished twice: ${finished}`);
  assert.equal(events.filter((e) => e.type === 'created').length, 1, 'created once');
  assert.equal(events.filter((e) => e.type === 'finished').length, 1, 'finished once');
}

async function runWithDrop(match: (c: ProxiedCommand) => boolean, goal: string, review = false) {
  const dropped = proxy.dropReplyOnce(match);
  const goalId = await fleet.client.enqueue({ goal, review });
  return { goalId, dropped };
}

for (const [what, match] of [
  ['enqueue (goal creation)', creation],
  ['plan → running', transition('planning', 'running')],
  ['reflect → next cycle', transition('reflecting', 'queued')],
  ['reflect → done', transition('reflecting', 'done')],
  ["a subtask's artifact write (its event and transcript in the same script)", artifactWrite],
  ["a subtask's start (its goal read and its event in one script)", subtaskStart],
] as const) {
  test(`a lost reply on ${what} still ends the goal done, nothing twice`, async () => {
    const { goalId, dropped } = await runWithDrop(match, `Lost reply on ${what}`);
    await dropped;
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 40_000 });
    assert.equal(g.status, 'done', g.reason ?? '');
    assertNoStepTwice((await fleet.client.goals.events(goalId)).map((e) => e.event));
    for (const f of await fleet.client.artifacts(goalId))
      assert.equal(f.version, f.name === 'solution.py' ? f.version : 1);
  });
}

test('a lost reply on resume still carries the goal on, once', async () => {
  const c = fleet.client;
  const goalId = await c.enqueue({ goal: 'Reviewed, resumed through a lost reply', review: true });
  assert.equal((await c.waitFor(goalId, { timeoutMs: 20_000 })).status, 'awaiting_human');
  const dropped = proxy.dropReplyOnce(transition('awaiting_human', 'queued'));
  const r = await c.resume(goalId);
  await dropped;
  assert.equal(r.status, 'queued');
  const g = await c.waitFor(goalId, { timeoutMs: 20_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.equal(g.step, 2, 'the next cycle ran');
  const resumed = (await c.goals.events(goalId)).filter((e) => e.event.type === 'resumed');
  assert.equal(resumed.length, 1);
});

test('a lost reply on cancel still reports the goal cancelled', async () => {
  const c = fleet.client;
  const goalId = await c.enqueue({ goal: 'Cancelled through a lost reply', review: true });
  assert.equal((await c.waitFor(goalId, { timeoutMs: 20_000 })).status, 'awaiting_human');
  const dropped = proxy.dropReplyOnce(transition('*', 'cancelled'));
  const r = await c.cancel(goalId);
  await dropped;
  assert.equal(r.cancelled, true, 'the replayed cancel must not read as refused');
  assert.equal(r.status, 'cancelled');
});
