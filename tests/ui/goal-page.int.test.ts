// The inspector in a real browser against real services: a goal enqueued from the form fills
// in cycle by cycle on its page without a reload, escalates at max depth (its reflector would go
// on) and is resumed with a note from the page, then ends done; its artifacts (inline and
// spilled) and transcripts open from it; another goal is cancelled from its page. One fleet
// (scripted model), one UI process, one browser.

import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { loadTranscript } from '../../shared/agent/transcripts.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { launchBrowser, outputPath, ROOT, recordMisbehaviour, startUi, type UiProc, until } from './harness.ts';

const redis = useRedis();
let fleet: Fleet;
let ui: UiProc;
let browser: Browser;
/** The goal the first test enqueues; the artifact and transcript test reads it. */
let liveGoalId: string | undefined;

before(async () => {
  await redis.ready;
  // Max depth 1: cycle 1's reflector would continue, so it escalates (a human must decide); a
  // resume grants 1 more, whose reflector ends the goal. Contents over 150 bytes spill to the
  // blob store, so the artifact page streams some from there.
  const env = { DEEPQ_SCRIPTED_LATENCY_MS: '250', DEEPQ_MAX_DEPTH: '1', DEEPQ_SPILL_BYTES: '150' };
  [fleet, browser] = await Promise.all([startFleet(redis.url, env), launchBrowser()]);
  ui = await startUi(fleet.env);
});
after(async () => {
  await browser?.close();
  await fleet?.stop();
});

/**
 * Records, in the page, each cycle block the page shows (the server's, then each the client script
 * inserts) and its subtasks' states. An init script, so no block goes by before it watches (a
 * watch set up after the page loaded missed the running cycle on a loaded machine). A string,
 * not a function: tsx's transform would add helpers the page does not have.
 */
const WATCH_DOM = `(() => {
  window.seen = [];
  const note = (n) => {
    if (!(n instanceof HTMLElement) || !n.matches('section.cycle')) return;
    const states = [...n.querySelectorAll('tr.subtask')].map((r) => r.dataset.state).join(',');
    window.seen.push('cycle ' + n.dataset.step + ': ' + states);
  };
  const watch = () => {
    const cycles = document.getElementById('cycles');
    if (!cycles) return;
    cycles.querySelectorAll('section.cycle').forEach(note);
    new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(note)))
      .observe(cycles, { childList: true });
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', watch);
  else watch();
})()`;

const seenInPage = (page: Page) => page.evaluate<string[]>('window.seen');
const text = async (page: Page, selector: string) => (await page.locator(selector).first().textContent())?.trim();

test('a goal enqueued from the form fills in cycle by cycle without a reload, then resumes with a note', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems = recordMisbehaviour(page);
  await page.addInitScript(WATCH_DOM);
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'Sort a list of numbers');
  await page.fill('form.enqueue input[name=maxTokens]', '500000');
  await page.fill('form.enqueue input[name=maxSteps]', '10');
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[a-z0-9]{6,32}$/);
  const goalId = page.url().split('/').pop()!;
  liveGoalId = goalId;
  await page.evaluate("window.mark = 'first load'");
  let navigations = 0;
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) navigations++;
  });

  // Cycle 1: research and code in parallel, each state shown as it happens; at max depth the
  // reflector's "continue" becomes an escalation.
  await page.locator('#cycle-1 tr.subtask[data-state="done"]').nth(1).waitFor({ timeout: 20_000 });
  assert.equal(await text(page, '#cycle-1 tr.subtask[data-index="0"] td.role'), 'research-specialist');
  assert.equal(await text(page, '#cycle-1 tr.subtask[data-index="1"] td.role'), 'code-writer');
  assert.match((await text(page, '#cycle-1 tr.subtask[data-index="1"] td.instruction'))!, /Sort a list of numbers/);
  assert.equal(await text(page, '#cycle-1 tr.subtask[data-index="1"] td.artifact'), 'solution.py');
  assert.equal(await text(page, '#cycle-1 tr.subtask[data-index="1"] td.tools'), '1', 'the list_files call');
  await page.locator('#goal-status', { hasText: 'awaiting_human' }).waitFor({ timeout: 20_000 });
  assert.equal(await text(page, '#cycle-1 .reflection .decision'), 'escalate');
  const escalation = (await text(page, '#decisions .decision-card[data-kind="escalation"] .detail'))!;
  assert.match(escalation, /max depth 1 .*the reflector would continue/);
  assert.equal(await text(page, '#budget-rows tr[data-budget="tokens"] td.limit'), '500,000');
  assert.equal(await text(page, '#budget-rows tr[data-budget="cycles"] td.used'), '1');
  assert.equal(await page.locator('#artifact-rows tr.artifact-row').count(), 2);
  // Each subtask's tokens: its run's input plus output, the same as its role's booked usage
  // (each role ran once so far).
  const g = await fleet.client.get(goalId);
  const booked = (role: string) =>
    Object.entries(g.usage)
      .filter(([key]) => key.startsWith(`${role}|`))
      .reduce((n, [, u]) => n + u.input + u.output, 0);
  const cells = [
    ['#cycle-1 tr.subtask[data-index="0"]', 'research-specialist'],
    ['#cycle-1 tr.subtask[data-index="1"]', 'code-writer'],
  ];
  for (const [row, role] of cells) {
    assert.ok(booked(role!) > 0, `${role} booked tokens`);
    assert.equal(await text(page, `${row} td.tokens`), booked(role!).toLocaleString('en-US'), role);
  }

  // All of it arrived by live patches of the page that was first loaded.
  assert.equal(navigations, 0, 'the page navigated');
  assert.equal(await page.evaluate('window.mark'), 'first load');
  const seen = await seenInPage(page);
  const running = seen.findIndex((x) => /^cycle 1: .*running/.test(x));
  assert.ok(running >= 0, `cycle 1 was not seen running: ${JSON.stringify(seen)}`);
  assert.ok(running < seen.indexOf('cycle 1: done,done'), JSON.stringify(seen));

  const shot = outputPath('goal-page.png');
  await page.screenshot({ path: shot, fullPage: true });
  // The README's picture is refreshed on request, so a test run leaves the checkout clean.
  const docs = join(ROOT, 'docs', 'ui-goal.png');
  if (process.env.DEEPQ_UPDATE_DOCS_SCREENSHOT === '1' || !existsSync(docs)) {
    mkdirSync(join(ROOT, 'docs'), { recursive: true });
    copyFileSync(shot, docs);
  }

  // Resume with a note and a file: the card drawn live and the one the server draws both send
  // files (multipart); cycle 1 shows the resume, cycle 2 is planned with the note and the file.
  const resumeForm = '#decisions form[action*="/resume?pause="]';
  assert.equal(await page.getAttribute(resumeForm, 'enctype'), 'multipart/form-data', 'the live card');
  await page.reload();
  assert.equal(await page.getAttribute(resumeForm, 'enctype'), 'multipart/form-data', 'the drawn card');
  await page.fill('#decisions textarea[name=note]', 'Focus on edge cases <b>please</b>');
  const notes = { name: 'cases.md', mimeType: 'text/markdown', buffer: Buffer.from('MARKER-UI-RESUME\n') };
  await page.setInputFiles('#decisions input[type=file][name=files]', notes);
  await page.click('#decisions button.primary');
  await page.waitForURL(new RegExp(`/goals/${goalId}$`));
  await page.locator('#cycle-1 .resumed .action', { hasText: 'replan with note' }).waitFor();
  assert.equal(await text(page, '#cycle-1 .resumed .note'), 'Focus on edge cases <b>please</b>');
  assert.equal(await text(page, '#cycle-1 .resumed .files'), '(files: cases.md)');
  assert.equal(await fleet.client.read(goalId, 'cases.md'), 'MARKER-UI-RESUME\n');
  // Cycle 2: the critic reads solution.py; at max depth again its reflector ends the finished goal.
  const cycle2 = page.locator('#cycle-2 .reflection[data-decision]');
  await cycle2.waitFor({ timeout: 20_000 });
  assert.equal(await cycle2.getAttribute('data-decision'), 'end');
  await page.locator('#goal-status', { hasText: 'done' }).waitFor({ timeout: 20_000 });
  assert.equal(await text(page, '#cycle-2 tr.subtask td.role'), 'critic');
  assert.equal(await text(page, '#cycle-2 tr.subtask td.read-files'), 'solution.py, cases.md');
  assert.equal(await page.locator('#artifact-rows tr.artifact-row').count(), 4);
  const planner = await page.locator('#cycle-2 a.planner-thread').getAttribute('href');
  const t = await loadTranscript(fleet.client, decodeURIComponent(planner!.split('/').pop()!));
  assert.match(JSON.stringify(t!.messages[0]), /Note from a human: Focus on edge cases <b>please<\/b>/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('artifacts (inline and spilled) and transcripts open from the goal page', async () => {
  assert.ok(liveGoalId, 'needs the goal of the first test');
  const goalId = liveGoalId;
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${goalId}`);

  // solution.py is over the spill threshold: streamed from the blob store.
  await page.click('#artifact-rows a:text-is("solution.py")');
  await page.waitForURL(/\/artifact\?name=solution\.py$/);
  const spilled = (await fleet.client.vfs.stat(goalId, 'solution.py'))!;
  assert.ok(spilled.blobRef, 'solution.py should have spilled');
  // Written in cycle 1 and kept: a replan (after the note too) does not redo finished work.
  assert.deepEqual([spilled.version, spilled.step], [1, 1]);
  assert.equal(await text(page, '.artifact-meta .role'), 'code-writer');
  assert.equal(await text(page, '.artifact-meta .step'), '1');
  assert.equal(await text(page, '.artifact-meta .version'), '1');
  assert.match((await text(page, '.artifact-meta .stored'))!, /spilled/);
  const content = await page.locator('#artifact-content').textContent();
  assert.equal(content, await fleet.client.read(goalId, 'solution.py'));
  assert.match(content!, /def solve/);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('a.download')]);
  assert.equal(download.suggestedFilename(), 'solution.py');
  assert.equal(readFileSync((await download.path())!, 'utf8'), content);

  // critique.json is small: inline in Redis.
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.click('#artifact-rows a:text-is("critique.json")');
  assert.match((await text(page, '.artifact-meta .stored'))!, /inline/);
  assert.equal(await page.locator('#artifact-content').textContent(), await fleet.client.read(goalId, 'critique.json'));

  // The code-writer's run: its list_files call and result folded, its answer in full.
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.click('#cycle-1 tr.subtask[data-index="1"] td.thread a');
  await page.waitForURL(/\/transcripts\/goal-[a-z0-9]+--code-writer-[a-z0-9]+$/);
  const call = page.locator('details.tool-call').first();
  assert.equal(await call.getAttribute('open'), null, 'tool calls start folded');
  assert.equal(await text(page, 'details.tool-call .tool-name'), 'list_files');
  assert.equal(await call.locator('pre').isVisible(), false);
  await call.locator('summary').click();
  assert.equal(await call.locator('pre').isVisible(), true);
  assert.equal(await page.locator('details.tool-result').count(), 1);
  assert.match((await page.locator('article.role-assistant pre.text').last().textContent())!, /def solve/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a goal is cancelled from its page', async () => {
  // Reviewed after every reflection: it cannot end on its own before the click.
  const goalId = await fleet.client.enqueue({ goal: 'Cancel me from the page', review: true });
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.click('#decisions button.danger');
  await page.waitForURL(new RegExp(`/goals/${goalId}$`));
  await page.locator('#goal-status', { hasText: 'cancelled' }).waitFor();
  assert.equal(await page.locator('#decisions .decision-card').count(), 0, 'nothing left to decide');
  assert.equal(await text(page, '#goal-reason'), 'cancelled by user');
  await until(async () => (await fleet.client.get(goalId)).status === 'cancelled', 'the goal cancelled in Redis');
  assert.deepEqual(problems, []);
  // Sent again (a page older than the goal's end): refused, saying how it ended.
  const again = await page.evaluate<[number, string]>(`fetch('/goals/${goalId}/cancel', { method: 'POST',
    headers: { 'x-csrf-token': document.querySelector('meta[name="csrf-token"]').content } })
    .then(async (r) => [r.status, await r.text()])`);
  assert.equal(again[0], 409);
  assert.match(again[1], /the goal is already cancelled: nothing to cancel/);
  await page.close();
});
