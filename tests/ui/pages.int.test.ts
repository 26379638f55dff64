// The inspector's other pages in a real browser, against goals, jobs and usage written with
// deepq's own stores (no services run): the Goals table (columns, status filter, newest first,
// pagination, "price unknown"), the enqueue form's review option, a cycle's subtask attempt,
// duration and tokens, usage rows marked "(estimated)", stored transcripts within their TTL,
// the Queues page (depth per queue and state, a failed job listed), bull-board offline (nothing
// fetched off 127.0.0.1), and the ui process's own /metrics and /healthz. One Redis, one UI
// process, one browser.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'bullmq';
import type { Browser, Page } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { newCallId } from '../../shared/goal/approvals.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { usageArgs } from '../../shared/goal/store.ts';
import { PLAN_QUEUE, subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { useRedis } from '../../testing/redis.ts';
import { recordMisbehaviour, type UiProc, until, useInspector } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
let browser: Browser;

useInspector(redis, {}, (x) => ({ client, ui, browser } = x));

const text = async (page: Page, selector: string) => (await page.locator(selector).first().textContent())?.trim();
const rowIds = (page: Page) =>
  page.locator('table.goals tr.goal-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-goal-id')));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A stored goal (nothing enqueued), `planning` when asked. */
async function storedGoal(text: string, planning = false): Promise<string> {
  const id = newGoalId();
  await client.goals.create(id, text, {}, false);
  if (planning) await client.lifecycle.beginPlanning(id);
  return id;
}

/** Books one call's usage to a goal, as token accounting does. */
function book(goalId: string, role: string, model: string, input: number, output: number, estimated = false) {
  const usage = { input, output, cache_read: 0, cache_write: 0 };
  return client.goals.recordUsage(goalId, usageArgs(role, model, usage, undefined, { estimated }));
}

test('the goals table: columns, newest first, pages of 25, a status filter, and "price unknown"', async () => {
  // 27 goals, oldest first; every third one planning. Apart by a few ms: the index orders by time.
  const ids: string[] = [];
  for (let i = 0; i < 27; i++) {
    ids.push(await storedGoal(`Table goal ${i}`, i % 3 === 0));
    await sleep(3);
  }
  const priced = ids.at(-1)!;
  const unpriced = ids.at(-2)!;
  // claude-haiku-5-5 is $1 / $5 per million input / output tokens.
  await book(priced, 'planner', 'claude-haiku-5-5', 1_000_000, 200_000);
  await book(unpriced, 'planner', 'no-such-model-x1', 5000, 700);
  await client.goals.redis.hset(client.goals.keys.goal(priced), 'step', '3');

  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/`);
  const headers = await page.locator('table.goals thead th').allTextContents();
  assert.deepEqual(headers, ['goal', 'status', 'cycles', 'tokens', 'est. cost', 'age', 'text']);
  assert.deepEqual(await rowIds(page), ids.slice(2).reverse(), 'page 1: the 25 newest, newest first');
  const row = (id: string) => `tr.goal-row[data-goal-id="${id}"]`;
  assert.equal(await text(page, `${row(priced)} td.status`), 'queued');
  assert.equal(await text(page, `${row(priced)} td.cycles`), '3');
  assert.equal(await text(page, `${row(priced)} td.tokens`), '1,200,000');
  assert.equal(await text(page, `${row(priced)} td.cost`), '$2.0000');
  assert.match((await text(page, `${row(priced)} td.age`))!, /^\d+s$/);
  assert.equal(await text(page, `${row(priced)} td.text`), 'Table goal 26');
  // A model without a price is never counted as $0.
  assert.equal(await text(page, `${row(unpriced)} td.tokens`), '5,700');
  assert.equal(await text(page, `${row(unpriced)} td.cost`), 'price unknown');
  assert.equal(await page.locator('a[rel=prev]').count(), 0);

  await page.click('a[rel=next]');
  assert.deepEqual(await rowIds(page), ids.slice(0, 2).reverse(), 'page 2: the 2 oldest');
  assert.equal(await page.locator('a[rel=next]').count(), 0);
  assert.equal(await text(page, '.pager span'), 'page 2');

  await page.click('a[rel=prev]');
  await page.selectOption('form.filter select[name=status]', 'planning');
  await page.click('form.filter button');
  await page.waitForURL(/[?&]status=planning/);
  const planning = ids.filter((_, i) => i % 3 === 0).reverse();
  assert.deepEqual(await rowIds(page), planning);
  const statuses = await page.locator('tr.goal-row td.status').allTextContents();
  assert.deepEqual(new Set(statuses.map((s) => s.trim())), new Set(['planning']));
  await page.goto(`${ui.url}/?status=done`);
  assert.equal(await text(page, 'p.hint'), 'No goals with status done.');

  // The goal page says the same of the cost, naming the model.
  await page.goto(`${ui.url}/goals/${unpriced}`);
  assert.equal(await text(page, '#goal-cost'), 'price unknown (no-such-model-x1)');
  assert.deepEqual(problems, []);
  await page.close();
});

test('the enqueue form: "pause for review" ticked makes a goal with review on', async () => {
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  const enqueue = async (goal: string, review: boolean) => {
    await page.goto(`${ui.url}/`);
    await page.fill('form.enqueue textarea[name=goal]', goal);
    if (review) await page.check('form.enqueue input[name=review]');
    await page.click('form.enqueue button');
    await page.waitForURL(/\/goals\/[a-z0-9]{6,32}$/);
    return page.url().split('/').pop()!;
  };
  const reviewed = await enqueue('Reviewed goal', true);
  assert.equal((await client.get(reviewed)).review, true);
  assert.equal(await page.locator('dt:text-is("review") + dd').textContent(), 'after every reflection');
  const plain = await enqueue('Unreviewed goal', false);
  assert.equal((await client.get(plain)).review, false);
  assert.equal(await page.locator('dt:text-is("review") + dd').textContent(), 'no');
  // Seconds need not be whole, as with --max-seconds (the browser refused 2.5 before sending it).
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'A goal of two and a half seconds');
  await page.fill('form.enqueue input[name=maxSeconds]', '2.5');
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[a-z0-9]{6,32}$/);
  assert.equal((await client.get(page.url().split('/').pop()!)).budgets.maxSeconds, 2.5);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the enqueue form sent twice (a double click, a resend) makes one goal: its hidden key', async () => {
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'Sent twice');
  // Both posts carry the same rendered form, as a browser resending it does.
  // A string, not a function: tsx's helpers (`__name`) do not exist in the page.
  const urls = (await page.evaluate(`(() => {
    const body = () => new URLSearchParams(new FormData(document.querySelector('form.enqueue')));
    const sent = [0, 1].map(() => fetch('/goals', { method: 'POST', body: body() }));
    return Promise.all(sent).then((rs) => rs.map((r) => r.status + ' ' + new URL(r.url).pathname));
  })()`)) as string[];
  assert.equal(urls[0], urls[1], 'both land on the same goal');
  assert.match(urls[0]!, /^200 \/goals\/[0-9a-f]{24}$/);
  const same = [];
  for (const id of await client.goals.redis.zrange(client.goals.keys.goalsIndex(), '0', '-1'))
    if ((await client.goals.get(id))?.goal === 'Sent twice') same.push(id);
  assert.equal(same.length, 1, 'one goal');
  // A page rendered again has a new key: the next goal with the same text is a goal of its own.
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'Sent twice');
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[0-9a-f]{24}$/);
  assert.notEqual(page.url().split('/').pop(), urls[0]!.split('/').pop());
  assert.deepEqual(problems, []);
  await page.close();
});

test('the enqueue form takes a goal of up to 100 KB in any script (its URL-encoded form is 3x that)', async () => {
  const page = await browser.newPage();
  const goal = `${'漢'.repeat(30_000)} done`; // 90 KB of UTF-8, 270 KB as a form sends it
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', goal);
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[a-z0-9]{6,32}$/);
  assert.equal((await client.get(page.url().split('/').pop()!)).goal, goal);
  await page.close();
});

test("a cycle's subtask attempt, duration and tokens; usage rows whose counts are estimated", async () => {
  const id = await storedGoal('Attempts and durations');
  const role = 'research-specialist';
  const task = (artifact: string) => ({ role, instruction: 'Look', expected_artifact: artifact, read_files: [] });
  const plan = { subtasks: [task('notes.md'), task('more.md')] };
  await client.lifecycle.beginPlanning(id);
  await client.lifecycle.dispatch(id, 1, plan, { threadId: threadIdFor(id, 'planner', 'aaaa1111') });
  const ref = { step: 1, index: 0, role, artifact: 'notes.md', threadId: threadIdFor(id, role, 'bbbb2222') };
  await client.goals.appendEvent(id, { type: 'subtask_started', ...ref, attempt: 2 });
  await client.goals.appendEvent(id, { type: 'subtask_finished', ...ref, bytes: 10, ms: 1534, tokens: 4321 });
  // As deepq wrote it before subtasks counted their tokens: no `tokens` field.
  const older = { ...ref, index: 1, artifact: 'more.md' };
  await client.goals.appendEvent(id, { type: 'subtask_started', ...older, attempt: 1 });
  await client.goals.appendEvent(id, { type: 'subtask_finished', ...older, bytes: 10, ms: 20 });
  await book(id, role, 'claude-haiku-5-5', 1000, 200);
  await book(id, role, 'local-model-x', 300, 40, true);
  // The threads index outlives its transcripts: one saved past their TTL is not listed.
  const threads = client.goals.keys.threads(id);
  const expiredAt = Date.now() - (client.cfg.transcriptTtlSeconds + 60) * 1000;
  await client.redis.zadd(threads, expiredAt, threadIdFor(id, role, 'cccc3333'), Date.now(), ref.threadId);

  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${id}`);
  assert.deepEqual(await page.locator('#thread-list li').allTextContents(), [ref.threadId]);
  const sub = '#cycle-1 tr.subtask[data-index="0"]';
  assert.equal(await text(page, `${sub} td.attempt`), '2');
  assert.equal(await text(page, `${sub} td.duration`), '1.53 s');
  assert.equal(await text(page, `${sub} td.tokens`), '4,321');
  const old = '#cycle-1 tr.subtask[data-index="1"]';
  assert.equal(await page.locator(old).getAttribute('data-state'), 'done');
  assert.equal(await text(page, `${old} td.tokens`), '');
  assert.equal(await text(page, `${old} td.duration`), '20 ms');
  const usage = page.locator('#usage-rows tr.usage-row');
  assert.equal(await usage.count(), 2);
  const estimated = page.locator('#usage-rows tr.usage-row[data-estimated="true"]');
  assert.equal(await estimated.locator('td.model').textContent(), 'local-model-x (estimated)');
  assert.equal(await estimated.locator('td.input').textContent(), '300');
  const exact = page.locator('#usage-rows tr.usage-row[data-estimated="false"]');
  assert.equal(await exact.locator('td.model').textContent(), 'claude-haiku-5-5');
  assert.equal(await page.locator('#usage-rows .estimated').count(), 1);
  // The live script renders the snapshot's rows the same way, marks included.
  await page.locator('#live-state[data-state="live"]').waitFor();
  await book(id, role, 'local-model-x', 1, 1, true);
  await client.goals.appendEvent(id, { type: 'evicted', step: 1, name: 'old.md', reason: 'done_aged' });
  await page.locator('#usage-rows tr[data-estimated="true"] td.input', { hasText: '301' }).waitFor();
  assert.equal(await estimated.locator('td.model').textContent(), 'local-model-x (estimated)');
  assert.equal(await exact.locator('td.model').textContent(), 'claude-haiku-5-5');
  // A run going on after its process died, live as on a reload.
  await client.goals.appendEvent(id, { type: 'subtask_started', ...older, attempt: 1, restarted: true });
  await page.locator(`${old} td.attempt`, { hasText: '1 (restarted)' }).waitFor();
  await page.reload();
  assert.equal(await text(page, `${old} td.attempt`), '1 (restarted)');
  assert.deepEqual(problems, []);
  await page.close();
});

test('on a 375-pixel screen no page scrolls sideways: wide tables scroll inside their cards', async () => {
  const id = await storedGoal(`A narrow screen ${'with a long word: '.repeat(3)}${'x'.repeat(300)}`);
  const role = 'research-specialist';
  const task = { role, instruction: `Look ${'y'.repeat(400)}`, expected_artifact: 'notes.md', read_files: [] };
  await client.lifecycle.beginPlanning(id);
  await client.lifecycle.dispatch(id, 1, { subtasks: [task] }, { threadId: threadIdFor(id, 'planner', 'aaaa1111') });
  const page = await browser.newPage({ viewport: { width: 375, height: 800 } });
  for (const path of ['/', `/goals/${id}`, '/queues-overview']) {
    await page.goto(`${ui.url}${path}`);
    const width = await page.evaluate<number>('document.documentElement.scrollWidth');
    assert.ok(width <= 375, `${path}: the page is ${width} px wide`);
  }
  await page.close();
});

test('a goal swept while its page is open: the page says it is gone, and offers no action', async () => {
  const id = await storedGoal('A goal swept while watched', true);
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${id}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.ok((await page.locator('main form button:enabled').count()) > 0, 'an action to offer first');
  await client.redis.del(client.goals.keys.goal(id), client.goals.keys.events(id));
  await page.locator('#live-state[data-state="gone"]').waitFor({ timeout: 10_000 });
  assert.match((await text(page, '#live-state'))!, /no longer exists/);
  assert.equal(await page.locator('main form button:enabled').count(), 0);
  await page.close();
});

test('the queues page: depth per queue and state, and a failed job in recent failures', async () => {
  // Two goals waiting for a planner (none runs here); one subtask job that fails for good.
  for (const g of ['Waiting one', 'Waiting two']) await client.enqueue({ goal: g });
  const goalId = await storedGoal('Its subtask fails');
  const queue = subagentQueueName('critic');
  const reason = 'boom: <b>not markup</b>';
  const connection = createRedis(redis.url, 'deepq:test:worker');
  const fail = async () => {
    throw new Error(reason);
  };
  const worker = new Worker(queue, fail, { connection, prefix: client.cfg.prefix });
  try {
    const job = await client.queues.get(queue).add('subtask', { goalId }, { attempts: 1 });
    await until(async () => (await job.getState()) === 'failed', 'the job failed');
  } finally {
    await worker.close();
    connection.disconnect();
  }
  // A new goal's first plan job is prioritized below work under way (shared/runtime/queues.ts).
  const waiting = await client.queues.get(PLAN_QUEUE).getPrioritizedCount();
  assert.ok(waiting >= 2, `plan jobs waiting: ${waiting}`);

  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/queues-overview`);
  const heads = await page.locator('table.queues thead th').allTextContents();
  assert.deepEqual(heads, [
    'queue',
    'waiting',
    'prioritized',
    'active',
    'delayed',
    'waiting-children',
    'failed',
    'completed',
  ]);
  const depth = (q: string, state: string) => text(page, `tr.queue-row[data-queue="${q}"] td[data-state="${state}"]`);
  assert.equal(await depth(PLAN_QUEUE, 'prioritized'), String(waiting));
  assert.equal(await depth(PLAN_QUEUE, 'failed'), '0');
  assert.equal(await depth(queue, 'failed'), '1');
  assert.equal(await depth(queue, 'waiting'), '0');
  const failure = page.locator('table.failures tr.failure-row');
  assert.equal(await failure.count(), 1);
  assert.equal(await failure.locator('td').nth(1).textContent(), queue);
  assert.equal(await failure.locator('td').nth(3).textContent(), '1', 'attempts');
  assert.equal(await failure.locator('td.reason').textContent(), reason, 'the reason, as text');
  assert.equal(await failure.locator('b').count(), 0);
  await failure.locator(`a[href="/goals/${goalId}"]`).click();
  await page.waitForURL(`${ui.url}/goals/${goalId}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('bull-board at /queues renders offline: nothing leaves 127.0.0.1, no console error', async () => {
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  const res = await page.goto(`${ui.url}/queues`);
  assert.equal(res!.status(), 200);
  assert.doesNotMatch(await res!.text(), /googleapis|https?:\/\/(?!127\.0\.0\.1)/);
  // The board lists deepq's queues once its script has fetched them from the API.
  await page.getByText(subagentQueueName('critic'), { exact: false }).first().waitFor();
  await page.getByText(PLAN_QUEUE, { exact: true }).first().waitFor();
  await page.waitForLoadState('networkidle');
  assert.ok(requests.length > 3, `requests: ${requests.join(' ')}`);
  const away = requests.filter((u) => !u.startsWith(`${ui.url}/`) && !u.startsWith('data:'));
  assert.deepEqual(away, [], 'requests off the inspector');
  const errors = problems.filter((p) => !p.startsWith('console log') && !p.startsWith('console info'));
  assert.deepEqual(errors, []);
  await page.close();
});

/** A sample's value in Prometheus text (the series with all these labels); 0 when not there yet. */
function sample(metrics: string, name: string, labels: Record<string, string> = {}): number {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = metrics
    .split('\n')
    .find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && pairs.every((p) => l.includes(p)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

test("the ui process's /metrics count its requests and live streams; /healthz and /readyz answer", async () => {
  const ops = `http://127.0.0.1:${ui.svc.port}`;
  const metrics = () => fetch(`${ops}/metrics`).then((r) => r.text());
  const served = ['deepq_ui_requests_total', { route: '/queues-overview', method: 'GET', status: '200' }] as const;
  const before = sample(await metrics(), ...served);
  for (let i = 0; i < 3; i++) await (await fetch(`${ui.url}/queues-overview`)).body?.cancel();
  const m = await metrics();
  assert.equal(sample(m, ...served), before + 3);
  assert.ok(sample(m, 'deepq_ui_request_duration_seconds_count', { route: '/queues-overview' }) >= 3);
  assert.equal(sample(m, 'deepq_ui_actions_total', { action: 'enqueue', outcome: 'ok' }), 6, "the form's six goals");
  assert.equal(
    sample(m, 'deepq_ui_actions_total', { action: 'enqueue', outcome: 'repeated' }),
    1,
    'one form sent twice',
  );
  assert.match(m, /^# TYPE deepq_ui_live_streams gauge$/m);
  assert.match(m, /^# TYPE deepq_ui_stream_readers gauge$/m);
  // Reached Redis at this scrape, as every service says (a constant 0 fired DeepqRedisUnreachable).
  assert.equal(sample(m, 'deepq_redis_up', { service: 'ui' }), 1);

  // A page following a goal is one live stream while it is open.
  const id = await storedGoal('Followed for the gauge');
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${id}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.equal(sample(await metrics(), 'deepq_ui_live_streams'), 1);
  assert.equal(sample(await metrics(), 'deepq_ui_stream_readers'), 1);
  assert.ok(sample(await metrics(), 'deepq_ui_requests_total', { route: '/goals/:id/events' }) >= 1);
  assert.ok(!(await metrics()).includes(id), 'labels are route patterns, never a goal id');
  await page.close();
  await until(async () => sample(await metrics(), 'deepq_ui_live_streams') === 0, 'the stream closed');

  // Tool calls waiting for a human: the same figure as every service reads (it stayed 0 here).
  assert.equal(sample(await metrics(), 'deepq_approvals_pending'), 0);
  const now = Date.now();
  const call = {
    callId: newCallId(),
    jobId: `${id}:1:0`,
    queue: subagentQueueName('code-writer'),
    role: 'code-writer',
  };
  const rec = { ...call, step: 1, index: 0, threadId: threadIdFor(id, 'code-writer', 'abcd1234'), tool: 'write_file' };
  const pending = { ...rec, input: '{}', requestedAt: now, expiresAt: now + 60_000, status: 'pending' as const };
  const agent = { messages: [], turns: 1, phaseTurns: 1, contractRetry: false, uses: [], awaiting: [] };
  const checkpoint = { threadId: rec.threadId, startedAt: now, calls: [{ index: 0, callId: call.callId }], agent };
  await client.approvals.request(id, call.jobId, checkpoint, [pending]);
  // A scrape serves the last refresh for up to a second.
  await until(async () => sample(await metrics(), 'deepq_approvals_pending') === 1, 'the pending gauge', 5000);

  const health = await fetch(`${ops}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { ok: true });
  const ready = await fetch(`${ops}/readyz`);
  assert.equal(ready.status, 200);
  assert.deepEqual(((await ready.json()) as { checks: unknown }).checks, { redis: true, http: true });
});

test('bidi overrides in model-written text show as escapes, on first render and live', async () => {
  const rlo = '\u202e';
  const id = await storedGoal(`Check ${rlo}this goal`, true);
  const role = 'research-specialist';
  const plan = { subtasks: [{ role, instruction: `Look ${rlo}txt.exe`, expected_artifact: 'a.md', read_files: [] }] };
  await client.lifecycle.dispatch(id, 1, plan, { threadId: threadIdFor(id, 'planner', 'aaaa2222') });
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${id}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  const shownText = () => page.evaluate<string>('document.body.innerText');
  assert.ok(!(await shownText()).includes(rlo), 'a raw override on the first render');
  assert.equal(await text(page, '#cycle-1 td.instruction'), 'Look \\u202etxt.exe');
  // Live: a subtask's failure reason and the reflector's escalation reason.
  const ref = { step: 1, index: 0, role, artifact: 'a.md', threadId: threadIdFor(id, role, 'bbbb3333') };
  await client.goals.appendEvent(id, { type: 'subtask_failed', ...ref, reason: `broke ${rlo}lived` });
  await page.locator('#cycle-1 tr.subtask[data-state="failed"]').waitFor();
  await client.lifecycle.beginReflecting(id);
  const reflection = { decision: 'escalate' as const, reason: `ask ${rlo}namuh a` };
  const outcomes = [{ index: 0, status: 'failed' as const }];
  assert.ok(await client.lifecycle.awaitHuman(id, { step: 1, reflection, outcomes }, 'escalation'));
  await page.locator('#goal-status', { hasText: 'awaiting_human' }).waitFor();
  assert.ok(!(await shownText()).includes(rlo), 'a raw override rendered live');
  assert.equal(await text(page, '#cycle-1 td.reason'), 'broke \\u202elived');
  assert.match((await text(page, '#goal-reason')) ?? '', /ask \\u202enamuh a/);
  // Updates after the first leave the plan out (it did not change): the page keeps its instruction.
  assert.equal(await text(page, '#cycle-1 td.instruction'), 'Look \\u202etxt.exe');
  await page.reload();
  assert.ok(!(await shownText()).includes(rlo), 'a raw override after a reload');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a goal whose timeline lost its first entries (past eventsMaxLen) says so above its cycles', async () => {
  const id = await storedGoal('A goal with a long past', true);
  const role = 'research-specialist';
  const plan = { subtasks: [{ role, instruction: 'Look', expected_artifact: 'a.md', read_files: [] }] };
  await client.lifecycle.dispatch(id, 1, plan, { threadId: threadIdFor(id, 'planner', 'aaaa3333') });
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${id}`);
  assert.equal(await page.locator('#timeline-trimmed').count(), 0, 'a whole timeline is not trimmed');
  // As MAXLEN trims a long goal's stream: `created` and the planning entries are gone.
  await redis.client.xtrim(client.goals.keys.events(id), 'MAXLEN', 1);
  await page.reload();
  assert.match(
    (await text(page, '#timeline-trimmed')) ?? '',
    /keeps its last 1,000\s+entries \(eventsMaxLen\)\. Cycles before 1 are not shown; cycle\s+1 may be shown in part\./,
  );
  await page.close();
});

test("a 404 quotes what the address asked for, cut short: crafted words never read as the page's own", async () => {
  const id = await storedGoal('A goal asked for a missing artifact', true);
  const bait = `report.md. Your session expired: sign in again at https://evil.example/login ${'x'.repeat(80)}`;
  const missing = await fetch(`${ui.url}/goals/${id}/artifact?name=${encodeURIComponent(bait)}`);
  assert.equal(missing.status, 404);
  const body = await missing.text();
  assert.match(body, new RegExp(`has no artifact &quot;${bait.slice(0, 40).replace(/[.?]/g, '\\$&')}`));
  assert.ok(!body.includes(bait), 'cut at 80 characters');
  // A cycle links its expected artifacts before they are written: the page says why it is missing.
  assert.match(
    body,
    /&quot; \(not yet: a subtask that writes it may still run; or it was evicted or never written\)\./,
  );
  const nowhere = await fetch(`${ui.url}/no/such/${'y'.repeat(100)}`);
  assert.equal(nowhere.status, 404);
  assert.match(await nowhere.text(), /Nothing at &quot;\/no\/such\/y{71}…&quot;\./);
});
