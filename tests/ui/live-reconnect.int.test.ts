// The Goal page keeps following its goal when things restart under it: Redis restarts (the
// inspector's blocking reader reconnects by itself), the inspector itself restarts (the
// browser's EventSource reconnects with Last-Event-ID and gets exactly what it missed, once),
// and the browser reconnects while Redis is down (the stream opens anyway and waits for it).
// No services run here: the timeline is written with deepq's own stores and transitions.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { stopProcess } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { recordMisbehaviour, startUi, type UiProc, until, useInspector } from './harness.ts';

const redis = useRedis({ appendonly: true });
let env: NodeJS.ProcessEnv;
let client: GoalClient;
let ui: UiProc;
let browser: Browser;

useInspector(redis, {}, (x) => ({ env, client, ui, browser } = x));

const ROLE = 'research-specialist';

/** A goal in its first cycle: planned and dispatched, one subtask not yet started. */
async function runningGoal(): Promise<string> {
  const id = newGoalId();
  const plan = { subtasks: [{ role: ROLE, instruction: 'Look it up', expected_artifact: 'notes.md', read_files: [] }] };
  await client.goals.create(id, 'Follow me through restarts', {}, false);
  await client.lifecycle.beginPlanning(id);
  await client.lifecycle.dispatch(id, 1, plan, { threadId: threadIdFor(id, 'planner', 'aaaa1111') });
  return id;
}

const stateOf = (page: Page) => page.locator('#cycle-1 tr.subtask').getAttribute('data-state');
const lines = (page: Page, pattern: string) =>
  page.evaluate<number>(`[...document.querySelectorAll('#activity-log li')].filter((l) =>
    l.textContent.includes(${JSON.stringify(pattern)})).length`);

test('a goal page follows across Redis and inspector restarts, missing and repeating nothing', async () => {
  const goalId = await runningGoal();
  const ref = { step: 1, index: 0, role: ROLE, artifact: 'notes.md', threadId: threadIdFor(goalId, ROLE, 'bbbb2222') };
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  // Headers as sent (EventSource adds Last-Event-ID below the page's view of the request).
  const reconnects: Promise<string | undefined>[] = [];
  page.on('request', (r) => {
    if (r.url().includes('/events')) reconnects.push(r.allHeaders().then((h) => h['last-event-id']));
  });
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.evaluate(`window.mark = 'first load'`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.equal(await stateOf(page), 'queued');

  await client.goals.appendEvent(goalId, { type: 'subtask_started', ...ref, attempt: 1 });
  await page.locator('#cycle-1 tr.subtask[data-state="running"]').waitFor();

  // Redis restarts (AOF keeps the stream); the inspector's reader reconnects and reads on.
  await redis.server.restart(1000);
  await client.goals.appendEvent(goalId, { type: 'tool_called', ...ref, tool: 'read_file', ms: 3, ok: true });
  await page.locator('#cycle-1 td.tools', { hasText: '1' }).waitFor({ timeout: 15_000 });

  // The inspector restarts; meanwhile the subtask finishes and the cycle is reflected on.
  const lastSeen = await page.locator('#goal').getAttribute('data-last-event-id');
  assert.equal(await stopProcess(ui.svc), 0, 'the inspector stops cleanly (exit 0) with a page following');
  await page.locator('#live-state[data-state="reconnecting"]').waitFor();
  await client.goals.appendEvent(goalId, { type: 'subtask_finished', ...ref, bytes: 12, ms: 40 });
  await client.lifecycle.beginReflecting(goalId);
  const reflection = { decision: 'continue' as const, reason: 'one more cycle' };
  await client.lifecycle.requeue(goalId, { step: 1, reflection, outcomes: [{ index: 0, status: 'done' }] });
  ui = await startUi(env, { port: ui.port });

  await page.locator('#cycle-1 .reflection[data-decision="continue"]').waitFor({ timeout: 15_000 });
  assert.equal(await stateOf(page), 'done');
  assert.equal(await page.locator('#goal-status').textContent(), 'queued');
  assert.equal(await page.evaluate('window.mark'), 'first load', 'the page was reloaded');
  // The reconnect asked for what came after the last entry the page had, and got each once.
  const sent = await Promise.all(reconnects);
  assert.equal(sent[0], undefined, 'the first connection starts after the page (?after=)');
  assert.equal(sent.at(-1), lastSeen);
  for (const what of ['started notes.md', 'called read_file', 'finished notes.md', 'reflected: continue']) {
    assert.equal(await lines(page, what), 1, `activity lines with "${what}"`);
  }
  // Chromium reports the dropped stream as a failed resource; nothing else may show up.
  const others = problems.filter((p) => !/net::ERR_|Failed to load resource/.test(p));
  assert.deepEqual(others, []);
  await page.close();
});

test('a browser that reconnects while Redis is down is answered, waits, and follows once Redis is back', async () => {
  const goalId = await runningGoal();
  const ref = { step: 1, index: 0, role: ROLE, artifact: 'notes.md', threadId: threadIdFor(goalId, ROLE, 'cccc3333') };
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  const answers: number[] = [];
  page.on('response', (r) => {
    if (r.url().includes('/events')) answers.push(r.status());
  });
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.evaluate(`window.mark = 'first load'`);
  await page.locator('#live-state[data-state="live"]').waitFor();

  // Redis goes down for a while; the inspector restarts meanwhile, so the browser reconnects
  // during the outage (before, that answer was an error or nothing until Redis came back).
  assert.equal(await stopProcess(ui.svc), 0);
  await page.locator('#live-state[data-state="reconnecting"]').waitFor();
  // Redis stays down until the checks below are done (a timed outage ran out on a loaded machine).
  let bringBack = () => {};
  const outage = redis.server.restart(new Promise<void>((r) => (bringBack = r)));
  try {
    await until(() => redis.client.status !== 'ready', 'Redis down');
    ui = await startUi(env, { port: ui.port, alive: true });
    // Pages asked meanwhile are answered soon, saying why, not held until Redis is back.
    const pages = ['/', `/goals/${goalId}`, '/queues-overview'].map(async (path) => {
      const res = await fetch(`${ui.url}${path}`, { signal: AbortSignal.timeout(5000) });
      assert.equal(res.status, 503, path);
      assert.match(await res.text(), /is Redis reachable\?/, path);
    });
    await Promise.all(pages);
    await page.locator('#live-state[data-state="waiting"]').waitFor({ timeout: 8000 });
    assert.equal(await page.locator('#live-state').textContent(), 'waiting for Redis…');
    assert.ok(answers.length >= 2 && answers.every((s) => s === 200), `answers: ${answers}`);
  } finally {
    bringBack();
  }

  // Redis is back: the same page follows on, no reload.
  await outage;
  await page.locator('#live-state[data-state="live"]').waitFor({ timeout: 15_000 });
  await client.goals.appendEvent(goalId, { type: 'subtask_started', ...ref, attempt: 1 });
  await page.locator('#cycle-1 tr.subtask[data-state="running"]').waitFor({ timeout: 15_000 });
  assert.equal(await page.evaluate('window.mark'), 'first load', 'the page was reloaded');
  assert.equal(await lines(page, 'started notes.md'), 1);
  const others = problems.filter((p) => !/net::ERR_|Failed to load resource/.test(p));
  assert.deepEqual(others, []);
  await page.close();
});

/** Tells the page it is hidden or shown, as a browser does when its tab goes to the background. */
const setVisibility = (page: Page, state: 'hidden' | 'visible') =>
  page.evaluate(`Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' });
    document.dispatchEvent(new Event('visibilitychange'))`);

test('hidden goal pages close their streams: a seventh page opens; shown again, a page catches up once', async () => {
  // One browser context: its 6 connections per host are shared by every page in it.
  const context = await browser.newContext();
  const goals = await Promise.all([1, 2, 3, 4, 5, 6].map(() => runningGoal()));
  const pages = await Promise.all(goals.map(() => context.newPage()));
  for (const [i, page] of pages.entries()) {
    await page.goto(`${ui.url}/goals/${goals[i]}`);
    await page.locator('#live-state[data-state="live"]').waitFor();
    await setVisibility(page, 'hidden');
    await page.locator('#live-state[data-state="paused"]').waitFor();
  }
  const seventh = await context.newPage();
  await seventh.goto(`${ui.url}/`, { timeout: 10_000 });
  assert.ok(await seventh.locator('h1').count(), 'the goals list did not load');

  // Shown again, the first page follows on from the last entry it had.
  const [page, goalId] = [pages[0]!, goals[0]!];
  const ref = { step: 1, index: 0, role: ROLE, artifact: 'notes.md', threadId: threadIdFor(goalId, ROLE, 'dddd4444') };
  await client.goals.appendEvent(goalId, { type: 'subtask_started', ...ref, attempt: 1 });
  await setVisibility(page, 'visible');
  await page.locator('#cycle-1 tr.subtask[data-state="running"]').waitFor();
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.equal(await lines(page, 'started notes.md'), 1);
  await context.close();
});

test('a page whose stream gets nothing from a frozen Redis says it is not updating, then goes on', async () => {
  const goalId = await runningGoal();
  const ref = { step: 1, index: 0, role: ROLE, artifact: 'notes.md', threadId: threadIdFor(goalId, ROLE, 'eeee5555') };
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.equal(await page.locator('#live-state').getAttribute('role'), 'status', 'a screen reader hears the state');
  // Redis answers nothing (stopped, not gone: no connection drops); the stream stays open, its
  // keep-alives coming from the inspector.
  const pid = redis.server.proc.pid!;
  process.kill(pid, 'SIGSTOP');
  try {
    await page.locator('#live-state[data-state="stale"]').waitFor({ timeout: 12_000 });
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  await page.locator('#live-state[data-state="live"]').waitFor({ timeout: 10_000 });
  await client.goals.appendEvent(goalId, { type: 'subtask_started', ...ref, attempt: 1 });
  await page.locator('#cycle-1 tr.subtask[data-state="running"]').waitFor({ timeout: 10_000 });
  await page.close();
});
