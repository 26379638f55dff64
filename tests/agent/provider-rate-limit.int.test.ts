// Fleet-wide flow control: a provider 429 pauses the role's whole queue for retry-after
// (BullMQ rate limit + RateLimitError), in every process, and the job goes back untouched.
// A job stopped by a failed model call (a 429, or a fault past its retries in place) goes on
// from that call on its next start: earlier turns are not asked again, their tools not re-run.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Queue } from 'bullmq';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import {
  type Fleet,
  type ServiceProc,
  startFleet,
  startProcess,
  stopProcess,
  waitForStart,
} from '../../testing/fleet.ts';
import {
  apiError,
  defaultHandler,
  firstUserText,
  type MessagesApiServer,
  roleOf,
  startMessagesApiServer,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();
let api: MessagesApiServer;
let fleet: Fleet;
const research: ServiceProc[] = [];
let limitedAt = 0;

before(async () => {
  await redis.ready;
  let researchCalls = 0;
  api = await startMessagesApiServer({
    handler: (body, i, req) => {
      if (roleOf(body) === 'research' && researchCalls++ === 0) {
        limitedAt = req.receivedAt;
        return apiError(429, 'rate limited', { 'retry-after': '2' });
      }
      return defaultHandler(body, i, req);
    },
  });
  // The rate limit stays on for 1 s after the last 429, and the sweep (which switches it off)
  // runs every second.
  const env = api.env({ DEEPQ_RATE_LIMIT_HOLD_SECONDS: '1', DEEPQ_SWEEP_INTERVAL_SECONDS: '1' });
  fleet = await startFleet(redis.url, env, { roles: ['code-writer', 'critic'] });
  // Two research processes, one job at a time each: a local sleep in one process would
  // leave the other free to call the provider; a queue-wide pause stops both.
  for (const n of [1, 2])
    research.push(
      startProcess(`research-${n}`, ['worker', '--role', 'research-specialist', '--concurrency', '1'], fleet.env),
    );
  await Promise.all(research.map((p) => waitForStart(p)));
});
after(async () => {
  await Promise.all(research.map((p) => stopProcess(p)));
  await fleet?.stop();
  await api?.close();
});

test('a 429 pauses the research queue in every process for retry-after, then all goals finish', async () => {
  const queue = fleet.client.queues.get(subagentQueueName('research-specialist'));
  // No 429 yet: no rate limit on the queue, so taking a job costs no limiter bookkeeping.
  assert.equal(await queue.getGlobalRateLimit(), null);
  const limit = watchRateLimit(queue);
  const ids = await Promise.all([1, 2, 3].map((i) => fleet.client.enqueue({ goal: `Rate limited goal ${i}` })));
  for (const id of ids) assert.equal((await fleet.client.waitFor(id, { timeoutMs: 60_000 })).status, 'done');
  // The 429 switched the queue's rate limit on; the sweep switched it off once retry-after (2 s)
  // and the hold (1 s) had passed without another 429.
  const { onAt, offAt } = await limit.untilOff(15_000);
  assert.ok(onAt >= limitedAt && onAt < limitedAt + 1000, `switched on ${onAt - limitedAt} ms after the 429`);
  assert.ok(offAt >= limitedAt + 3000, `switched off ${offAt - limitedAt} ms after the 429, before its hold ended`);
  assert.ok(limitedAt > 0, 'the 429 was never served');
  // A job already taken elsewhere may finish its calls; no process may take another
  // research job until retry-after has passed. (The pause is set a moment after the 429 is
  // served, once the worker has read it: hence the 300 ms of slack.)
  const jobs0 = await fleet.client.queues.get(subagentQueueName('research-specialist')).getJobs(['completed']);
  const taken = jobs0.map((j) => j.processedOn!).filter((t) => t > limitedAt + 300 && t < limitedAt + 1800);
  assert.deepEqual(taken, [], 'a research job was taken while the queue was paused');
  assert.ok(
    jobs0.some((j) => j.processedOn! >= limitedAt + 1800),
    'the limited job never ran again after the pause',
  );
  // The limited job went back to the queue without using up an attempt.
  const jobs = await fleet.client.queues.get(subagentQueueName('research-specialist')).getJobs(['completed']);
  assert.equal(jobs.length, 3);
  assert.ok(
    jobs.every((j) => j.attemptsMade <= 1),
    JSON.stringify(jobs.map((j) => j.attemptsMade)),
  );
  assert.match(research.map((p) => p.output()).join(''), /provider rate limit: pausing the queue/);
});

/**
 * The research subagent's run of the goal `text` went on from its failed turn 2: turn 1 asked
 * once, its tool run once. Returns the goal's timeline events.
 */
async function wentOnFromTurnTwo(goalId: string, text: string, again: string, reran: string) {
  const asked = api.messageRequests().filter((r) => roleOf(r.body) === 'research' && r.body.messages.length === 1);
  const ofGoal = asked.filter((r) => firstUserText(r.body).includes(text));
  assert.equal(ofGoal.length, 1, again);
  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  const looks = events.filter((e) => e.type === 'tool_called' && e.role === 'research-specialist');
  assert.equal(looks.length, 1, reran);
  return events;
}

/** Polls the queue's global rate limit: when it went on, and when off again after that. */
function watchRateLimit(queue: Queue) {
  let onAt = 0;
  let offAt = 0;
  const timer = setInterval(async () => {
    const on = (await queue.getGlobalRateLimit().catch(() => null)) !== null;
    if (on && !onAt) onAt = Date.now();
    if (!on && onAt && !offAt) offAt = Date.now();
  }, 50);
  return {
    async untilOff(timeoutMs: number): Promise<{ onAt: number; offAt: number }> {
      await until(() => offAt > 0, timeoutMs, 'the rate limit was never switched on and off again');
      clearInterval(timer);
      return { onAt, offAt };
    },
  };
}

test('a provider that never stops answering 429 fails the subtask with the reason instead of looping', async () => {
  const always = await startMessagesApiServer({
    handler: (body, i, req) =>
      roleOf(body) === 'research'
        ? apiError(429, 'rate limited', { 'retry-after': '0' })
        : defaultHandler(body, i, req),
  });
  // One cycle only: a replan would plan the failed research again (finished work is kept,
  // failed work is not), and this test counts the calls of one job.
  const f = await startFleet(
    redis.url,
    always.env({ DEEPQ_MAX_RATE_LIMIT_REQUEUES: '2', DEEPQ_SUBTASK_ATTEMPTS: '2', DEEPQ_MAX_DEPTH: '1' }),
  );
  try {
    const goalId = await f.client.enqueue({ goal: 'Never served' });
    const g = await f.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.ok(['done', 'awaiting_human', 'failed'].includes(g.status), g.status);
    const job = await f.client.queues.get(subagentQueueName('research-specialist')).getJob(`${goalId}:1:0`);
    assert.equal(await job!.getState(), 'failed');
    assert.match(job!.failedReason, /provider rate limit persisted through 2 queue pauses/);
    const failed = (await f.client.goals.events(goalId)).map((e) => e.event).find((e) => e.type === 'subtask_failed');
    assert.ok(failed?.type === 'subtask_failed', 'a subtask_failed event');
    assert.match(String(failed.reason), /rate limit persisted/);
    // The count spans attempts: 2 re-queues + the call that fails attempt 1, then attempt 2's
    // one call fails at once. Nothing after that.
    assert.equal(always.messageRequests().filter((r) => roleOf(r.body) === 'research').length, 4);
  } finally {
    await f.stop();
    await always.close();
  }
});

test('429s spread over a run, each followed by an answered call, are not in a row: the subtask finishes', async () => {
  // Every other research request is refused: each turn is answered on its second try.
  let n = 0;
  const spread = await startMessagesApiServer({
    handler: (body, i, req) =>
      roleOf(body) === 'research' && n++ % 2 === 0
        ? apiError(429, 'rate limited', { 'retry-after': '0' })
        : defaultHandler(body, i, req),
  });
  const f = await startFleet(
    redis.url,
    spread.env({ DEEPQ_MAX_RATE_LIMIT_REQUEUES: '1', DEEPQ_SUBTASK_ATTEMPTS: '1', DEEPQ_MAX_DEPTH: '1' }),
  );
  try {
    const goalId = await f.client.enqueue({ goal: 'Spread limits' });
    await f.client.waitFor(goalId, { timeoutMs: 60_000 });
    const job = await f.client.queues.get(subagentQueueName('research-specialist')).getJob(`${goalId}:1:0`);
    assert.equal(await job!.getState(), 'completed', job!.failedReason);
    assert.ok(n >= 4, `two turns, each refused once: ${n} requests`);
  } finally {
    await f.stop();
    await spread.close();
  }
});

test("a job still refused after pausing its queue 3 times waits alone: other goals' subtasks go on", {
  timeout: 60_000,
}, async () => {
  let refusals = 0;
  const poisoned = await startMessagesApiServer({
    handler: (body, i, req) => {
      if (roleOf(body) !== 'research' || !firstUserText(body).includes('Poison')) return defaultHandler(body, i, req);
      // Short pauses first; then a minute, which would hold every goal's research were it the queue's.
      refusals++;
      return apiError(429, 'request over the per-minute input tokens', { 'retry-after': refusals <= 3 ? '1' : '60' });
    },
  });
  const f = await startFleet(redis.url, poisoned.env());
  try {
    const poison = await f.client.enqueue({ goal: 'Poison: one request too large' });
    const queue = f.client.queues.get(subagentQueueName('research-specialist'));
    const poisonJob = `${poison}:1:0`;
    await until(async () => (await queue.getJob(poisonJob))?.data.rateLimitRequeues >= 4, 30_000);
    // The count is stored before the job moves itself to delayed: a moment of `active` between.
    await until(
      async () => (await queue.getJobState(poisonJob)) === 'delayed' || undefined,
      5_000,
      'the refused job waiting by itself',
    );
    const other = await f.client.enqueue({ goal: 'An ordinary goal' });
    const g = await f.client.waitFor(other, { timeoutMs: 30_000 });
    assert.equal(g.status, 'done', g.reason ?? '');
    assert.equal(await queue.getJobState(poisonJob), 'delayed', 'the poison job ran again meanwhile');
  } finally {
    await f.stop();
    await poisoned.close();
  }
});

test('a job put back by a 429, then failed: its next attempt is a new attempt, not a restart', async () => {
  let research = 0;
  const api2 = await startMessagesApiServer({
    handler: (body, i, req) => {
      if (roleOf(body) === 'research' && ++research <= 2)
        return research === 1 ? apiError(429, 'rate limited', { 'retry-after': '1' }) : apiError(500, 'boom');
      return defaultHandler(body, i, req);
    },
  });
  const f = await startFleet(redis.url, api2.env({ DEEPQ_MODEL_MAX_RETRIES: '0', DEEPQ_RATE_LIMIT_HOLD_SECONDS: '1' }));
  try {
    const goalId = await f.client.enqueue({ goal: 'Research something small' });
    await f.client.waitFor(goalId, { timeoutMs: 60_000 });
    const starts = (await f.client.goals.events(goalId)).flatMap(({ event: e }) =>
      e.type === 'subtask_started' && e.role === 'research-specialist' ? [[e.attempt, e.restarted ?? false]] : [],
    );
    // The 429 put it back on purpose, with its conversation saved: nothing was lost.
    assert.deepEqual(starts, [
      [1, false],
      [2, false],
    ]);
  } finally {
    await f.stop();
    await api2.close();
  }
});

test('a 429 on a later turn: the job goes on from that turn, not from the start', async () => {
  // The research subagent looks at the files (turn 1), then its turn 2 is answered 429 once.
  let limited = 0;
  api.setHandler((body, i, req) => {
    const later = roleOf(body) === 'research' && body.messages.length > 1;
    if (later && firstUserText(body).includes('Turn two limited') && limited++ === 0)
      return apiError(429, 'rate limited', { 'retry-after': '1' });
    return defaultHandler(body, i, req);
  });
  const goalId = await fleet.client.enqueue({ goal: 'Turn two limited' });
  assert.equal((await fleet.client.waitFor(goalId, { timeoutMs: 60_000 })).status, 'done');
  assert.equal(limited, 2, 'the 429 was not served, or its turn not asked again');
  const again = 'turn 1 was asked again after the 429';
  const events = await wentOnFromTurnTwo(goalId, 'Turn two limited', again, "turn 1's tool ran again after the 429");
  assert.equal(events.filter((e) => e.type === 'subtask_started' && e.role === 'research-specialist').length, 1);
});

test('a 500 past the retries in place on a later turn: the next attempt goes on from that turn', async () => {
  // Turn 2 of the research subagent is answered 500 four times: the first request and its 3
  // retries in place, so the job's first attempt fails; its second gets an answer.
  let faults = 0;
  api.setHandler((body, i, req) => {
    const later = roleOf(body) === 'research' && body.messages.length > 1;
    if (later && firstUserText(body).includes('Turn two faulty') && faults++ < 4)
      return apiError(500, 'internal error');
    return defaultHandler(body, i, req);
  });
  const goalId = await fleet.client.enqueue({ goal: 'Turn two faulty' });
  assert.equal((await fleet.client.waitFor(goalId, { timeoutMs: 60_000 })).status, 'done');
  assert.equal(faults, 5, 'the faults were not served, or the failed turn not asked again');
  const again = 'turn 1 was asked again by the second attempt';
  const events = await wentOnFromTurnTwo(
    goalId,
    'Turn two faulty',
    again,
    "turn 1's tool ran again in the second attempt",
  );
  const starts = events.filter((e) => e.type === 'subtask_started' && e.role === 'research-specialist');
  assert.deepEqual(
    starts.map((e) => e.type === 'subtask_started' && e.attempt),
    [1, 2],
    'the second attempt is not on the timeline',
  );
});
