// The smarter cycles on the Goal page, in a real browser against real services: a goal paused
// at its token budget (`--on-budget pause`, enqueued from the form) shows which budget ran out
// and offers to raise it; bad numbers are refused, saying why; raised, the goal carries on to
// done. A stall, subtasks stopped partial at their plan's token cap, sandbox runs and
// approvals show in the cycle blocks and the activity log, live and on first render (these
// timelines are written with deepq's own stores and transitions: the scripted model does not
// stall on purpose). One fleet (scripted model), one UI process, one browser.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { TimelineEventBody } from '../../shared/goal/events.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { Decided } from '../../shared/goal/lifecycle.ts';
import { totalTokens, usageArgs } from '../../shared/goal/store.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { launchBrowser, outputPath, recordMisbehaviour, startUi, type UiProc, until } from './harness.ts';

const redis = useRedis();
let fleet: Fleet;
let ui: UiProc;
let browser: Browser;

before(async () => {
  await redis.ready;
  [fleet, browser] = await Promise.all([startFleet(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '100' }), launchBrowser()]);
  ui = await startUi(fleet.env);
});
after(async () => {
  await browser?.close();
  await fleet?.stop();
});

const text = async (page: Page, selector: string) => (await page.locator(selector).first().textContent())?.trim();
const count = (n: number) => n.toLocaleString('en-US');
const budgetCard = (page: Page) => page.locator('#decisions .decision-card[data-kind="budget"]');

/** Submits the budget card's raise with these fields; returns the response's status. */
async function raise(page: Page, fields: Record<string, string>): Promise<number> {
  for (const [name, value] of Object.entries(fields)) await budgetCard(page).locator(`input[name=${name}]`).fill(value);
  const [res] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && /\/resume\?pause=\d+$/.test(r.url())),
    budgetCard(page).locator('button.primary').click(),
  ]);
  await page.waitForLoadState();
  return res.status();
}

test('a goal paused at its token budget says so, refuses bad numbers, and carries on to done once raised', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'Sort a list of numbers');
  // Enough for the plan, too little for the subagents' first calls: they park mid-cycle.
  await page.fill('form.enqueue input[name=maxTokens]', '500');
  await page.selectOption('form.enqueue select[name=onBudget]', 'pause');
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[a-z0-9]{6,32}$/);
  const goalId = page.url().split('/').pop()!;

  await budgetCard(page).waitFor({ timeout: 30_000 });
  const g = await fleet.client.get(goalId);
  assert.deepEqual([g.status, g.pausedFor, g.pausedFrom], ['awaiting_human', 'budget', 'running']);
  const used = totalTokens(g.tokens);
  assert.ok(used > 0 && used < 500, `the plan used ${used} tokens`);
  assert.equal(await text(page, '#goal-status'), 'awaiting_human');
  assert.equal(
    await budgetCard(page).locator('.title').textContent(),
    `Paused at its token budget: ${count(used)} of 500 tokens used`,
  );
  const detail = (await budgetCard(page).locator('.detail').textContent())!;
  assert.ok(detail.startsWith(`${g.reason}. The work so far is kept`), detail);
  assert.ok(detail.includes(`deepq resume ${goalId} --max-tokens N`), detail);
  assert.equal(await page.locator('#decisions .decision-card[data-kind="escalation"]').count(), 0, 'not an escalation');
  assert.equal(await page.locator('#budget-rows tr[data-budget="tokens"]').getAttribute('data-paused'), 'true');
  assert.equal(await text(page, '#budget-rows tr[data-paused="true"] .paused-mark'), 'paused here');
  const paused = page.locator('#cycle-1 .paused[data-paused-for="budget"][data-budget="tokens"]');
  assert.equal(await paused.locator('.title').textContent(), 'Paused at its token budget');
  assert.equal(await paused.locator('.reason').textContent(), g.reason);
  // The second subagent may be refused a moment after the first paused the goal: its row follows live.
  await page.locator('#cycle-1 tr.subtask[data-state="parked"]').nth(1).waitFor({ timeout: 10_000 });
  const states = await page.locator('#cycle-1 tr.subtask').evaluateAll((rows) => rows.map((r) => r.dataset.state));
  assert.deepEqual(states, ['parked', 'parked'], 'the running subagents wait for the budget');
  await page.screenshot({ path: outputPath('budget-pause.png'), fullPage: true });

  // Bad numbers: each refused with the rule it broke, the goal left as it was.
  assert.equal(await raise(page, { maxTokens: '0' }), 409);
  assert.equal(await text(page, 'h1'), 'resume refused');
  assert.equal(await text(page, '.error'), 'max tokens (--max-tokens) must be a whole number ≥ 1, not "0"');
  await page.click('text=Back');
  // Read again: a call in flight at the pause books its usage as its job parks.
  const usedNow = totalTokens((await fleet.client.get(goalId)).tokens);
  assert.equal(await raise(page, { maxTokens: String(usedNow) }), 409);
  assert.equal(
    await text(page, '.error'),
    `--max-tokens ${usedNow} is not above the ${usedNow} tokens the goal has used`,
  );
  await page.click('text=Back');
  assert.equal(await raise(page, {}), 409);
  assert.match((await text(page, '.error'))!, /paused at its budget .*: resume it with a higher --max-tokens/);
  await page.click('text=Back');
  assert.equal((await fleet.client.get(goalId)).status, 'awaiting_human');
  await typingSurvivesALiveUpdate(page, goalId);

  // Raised: the parked subagents carry on, the goal runs its second cycle and ends done.
  assert.equal(await raise(page, { maxTokens: '200000' }), 303);
  await page.waitForURL(`${ui.url}/goals/${goalId}`);
  await page.locator('#goal-status', { hasText: 'done' }).waitFor({ timeout: 30_000 });
  const resumed = page.locator('#cycle-1 .resumed');
  assert.equal(await resumed.locator('.action').textContent(), 'raise budget');
  assert.equal(await resumed.locator('.raised').textContent(), '(max tokens 200,000)');
  assert.equal(await text(page, '#budget-rows tr[data-budget="tokens"] td.limit'), '200,000');
  assert.equal(await page.locator('#budget-rows tr[data-paused="true"]').count(), 0);
  assert.equal(await page.locator('#decisions .decision-card').count(), 0);
  await page.locator('#cycle-2 .reflection[data-decision="end"]').waitFor();
  assert.equal(await page.locator('#artifact-rows tr.artifact-row').count(), 3);
  const starts = (await fleet.client.goals.events(goalId)).filter((e) => e.event.type === 'subtask_started');
  assert.equal(starts.length, 3, 'cycle 1 two subtasks (each started once: parked, not re-run), cycle 2 one');
  // Chromium logs each refused POST's 409 answer; nothing else may show up.
  assert.deepEqual(
    problems.filter((p) => !p.includes('responded with a status of 409')),
    [],
  );
  await page.close();
});

/**
 * A live update that renders the card again (a late call's usage changes the used count in its
 * label) while a budget is being typed: the field keeps what was typed, the focus and so the
 * next keystrokes. Before, the focus went with the old field and the keystrokes were lost.
 * The card is patched, not replaced: its button is the same node, so a click landing as the
 * update arrives still submits (a replaced button between mouse down and up swallowed it).
 */
async function typingSurvivesALiveUpdate(page: Page, goalId: string): Promise<void> {
  const field = budgetCard(page).locator('input[name=maxTokens]');
  const label = budgetCard(page).locator('label:has(input[name=maxTokens])');
  await budgetCard(page)
    .locator('button.primary')
    .evaluate((b) => Object.assign(window, { keptButton: b }));
  await field.click();
  await page.keyboard.type('12');
  const before = await label.textContent();
  const g = await fleet.client.get(goalId);
  const [role, model] = Object.keys(g.usage)[0]!.split('|') as [string, string];
  const event: TimelineEventBody = {
    type: 'tool_called',
    step: 1,
    role,
    threadId: 'late-call',
    tool: 'list_files',
    ms: 1,
    ok: true,
  };
  await fleet.client.goals.toolCalled(
    goalId,
    event,
    usageArgs(role, model, { input: 7, output: 0, cache_read: 0, cache_write: 0 }),
  );
  await until(async () => (await label.textContent()) !== before, 'the card rendered again with the new count');
  await page.keyboard.type('3');
  assert.equal(await field.inputValue(), '123');
  assert.ok(await field.evaluate((f) => f === document.activeElement), 'the field being typed in keeps the focus');
  assert.ok(await page.evaluate(() => (window as { keptButton?: Element }).keptButton?.isConnected), 'the same button');
  await field.fill('');
}

const ROLE = 'research-specialist';
const CODER = 'code-writer';
/** Model-written text in the failure a stall names: must stay text. */
const HOSTILE = '<img src=x onerror="window.pwned=1">';
const STALL_REASON =
  `stalled: 3 cycles without progress (cycles 1-3): no subtask finished; ` +
  `the same failure 3×: "empty summary ${HOSTILE}"; the same plan 3×`;

/** A goal running cycle 3 with a capped research subtask and a code subtask. */
async function cycleThree(goal: string): Promise<string> {
  const id = newGoalId();
  const task = (role: string, artifact: string, extra = {}) => ({
    role,
    instruction: `${goal}: ${artifact}`,
    expected_artifact: artifact,
    read_files: [],
    ...extra,
  });
  const plan = { subtasks: [task(ROLE, 'flaky.md', { token_cap: 2000 }), task(CODER, 'check.py')] };
  await fleet.client.goals.create(id, goal, {}, false);
  await fleet.client.lifecycle.beginPlanning(id);
  await fleet.client.lifecycle.dispatch(id, 3, plan, { threadId: threadIdFor(id, 'planner', 'cccc3333') });
  return id;
}

/** Cycle 3's events: a partial finish, two sandbox runs and an approved call. */
function cycleThreeEvents(id: string): TimelineEventBody[] {
  const ref = (index: number, role: string, artifact: string) => ({
    step: 3,
    index,
    role,
    artifact,
    threadId: threadIdFor(id, role, `t${index}`),
  });
  const research = ref(0, ROLE, 'flaky.md');
  const code = ref(1, CODER, 'check.py');
  const call = { step: 3, index: 1, role: CODER, threadId: code.threadId, callId: 'ap-0123456789', tool: 'run_code' };
  const reason = 'stopped at its token cap (1900 of 2000 tokens): partial';
  return [
    { type: 'subtask_started', ...research, attempt: 1 },
    { type: 'subtask_finished', ...research, bytes: 12, ms: 880, reason, partial: true, tokens: 1900 },
    { type: 'subtask_started', ...code, attempt: 1 },
    { type: 'tool_called', ...call, ms: 1234, ok: true },
    { type: 'tool_called', ...call, tool: 'run_tests', ms: 2500, ok: false },
    { type: 'approval_requested', ...call, input: `{"code":"print(1)","note":"${HOSTILE}"}`, expiresAt: Date.now() },
    { type: 'approval_decided', ...call, decision: 'approved' },
  ];
}

function stalledDecision(action: 'escalate' | 'fail'): Decided {
  const failure = (step: number) => ({ step, done: 0, failures: ['empty summary'], plan: 'p' });
  return {
    step: 3,
    reflection: { decision: 'escalate', reason: STALL_REASON },
    outcomes: [
      { index: 0, status: 'partial' },
      { index: 1, status: 'failed' },
    ],
    progress: [failure(1), failure(2), failure(3)],
    stalled: { reason: STALL_REASON, cycles: 3, action },
  };
}

const activityLines = (page: Page) => page.locator('#activity-log li').allTextContents();

/** What the page shows of cycle 3 before the stall, however it got there. */
async function assertCycleThree(page: Page): Promise<void> {
  const row = (i: number) => `#cycle-3 tr.subtask[data-index="${i}"]`;
  assert.equal(await page.locator(row(0)).getAttribute('data-state'), 'partial');
  assert.equal(await text(page, `${row(0)} td.state`), 'partial');
  assert.equal(await text(page, `${row(0)} td.token-cap`), '2,000');
  assert.equal(await text(page, `${row(0)} td.tokens`), '1,900', "the subtask's own tokens");
  assert.equal(await text(page, `${row(0)} td.reason`), 'stopped at its token cap (1900 of 2000 tokens): partial');
  assert.equal(await text(page, `${row(1)} td.token-cap`), '');
  assert.equal(await text(page, `${row(1)} td.tools`), '2 (1 failed)');
  const lines = (await activityLines(page)).join('\n');
  assert.match(lines, /cycle 3 \[0\] research-specialist finished PARTIAL flaky\.md: stopped at its token cap/);
  assert.match(lines, /cycle 3 \[1\] code-writer called run_code \(ok, 1234 ms\)/);
  assert.match(lines, /cycle 3 \[1\] code-writer called run_tests \(FAILED, 2500 ms\)/);
  const input = `{"code":"print(1)","note":"${HOSTILE}"}`;
  const asked = `cycle 3 [1] code-writer approval requested ap-0123456789: run_code ${input}`;
  assert.ok(lines.includes(asked), lines);
  assert.match(lines, /cycle 3 \[1\] code-writer ap-0123456789 \(run_code\) approved/);
}

/** What the page shows of the stall, however it got there. */
async function assertStalled(page: Page, action: 'escalate' | 'fail'): Promise<void> {
  const stalled = page.locator(`#cycle-3 .stalled[data-action="${action}"]`);
  const then = action === 'fail' ? 'the goal failed' : 'escalated to a human';
  assert.equal(
    await stalled.locator('.title').textContent(),
    `Stalled: 3 cycles without progress; ${then} without asking the model`,
  );
  assert.equal(await stalled.locator('.reason').textContent(), STALL_REASON);
  const verb = action === 'fail' ? 'failing' : 'escalating';
  const line = `cycle 3 STALLED, ${verb} without asking the model: ${STALL_REASON}`;
  assert.ok(
    (await activityLines(page)).some((l) => l.endsWith(line)),
    'the stalled activity line',
  );
  assert.equal(await page.locator('#cycle-3 tr.subtask[data-index="0"]').getAttribute('data-state'), 'partial');
  assert.equal(await page.locator('#goal img').count(), 0, 'model text stays text');
  assert.equal(await page.evaluate('typeof window.pwned'), 'undefined');
}

test('a stall, partial subtasks with their caps, sandbox runs and approvals: live and on first render', async () => {
  const goalId = await cycleThree('Summarise the flaky notes');
  for (const e of cycleThreeEvents(goalId)) await fleet.client.goals.appendEvent(goalId, e);
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  await assertCycleThree(page);
  await page.evaluate('window.mark = "first load"');
  const code = `#cycle-3 tr.subtask[data-index="1"]`;
  assert.equal(await text(page, `${code} td.tokens`), '', 'still running: no count yet');

  // The code subtask fails while the page is open: its tokens arrive with its end event.
  const failedCode = {
    step: 3,
    index: 1,
    role: CODER,
    artifact: 'check.py',
    threadId: threadIdFor(goalId, CODER, 't1'),
  };
  const failure = { type: 'subtask_failed' as const, ...failedCode, ms: 4000, reason: 'tests failed', tokens: 12345 };
  await fleet.client.goals.appendEvent(goalId, failure);
  await page.locator(`${code}[data-state="failed"]`).waitFor();
  assert.equal(await text(page, `${code} td.tokens`), '12,345');

  // The stall lands while the page is open.
  await fleet.client.lifecycle.beginReflecting(goalId);
  assert.ok(await fleet.client.lifecycle.awaitHuman(goalId, stalledDecision('escalate'), 'escalation'));
  await page.locator('#cycle-3 .stalled').waitFor();
  await page.locator('#decisions .decision-card[data-kind="escalation"]').waitFor();
  await assertStalled(page, 'escalate');
  const card = page.locator('#decisions .decision-card[data-kind="escalation"]');
  assert.equal(
    await card.locator('.title').textContent(),
    'Stalled: no progress, the reflector stopped asking the model; a human must decide',
  );
  const counts = 'cycles 1: 0 done, 1 failed; 2: 0 done, 1 failed; 3: 0 done, 1 failed';
  assert.equal(await card.locator('.detail').textContent(), `${STALL_REASON} (${counts})`);
  assert.equal(await page.evaluate('window.mark'), 'first load', 'arrived live');
  await page.screenshot({ path: outputPath('stalled.png'), fullPage: true });

  // First render of the same.
  await page.reload();
  await assertCycleThree(page);
  assert.equal(await text(page, `${code} td.tokens`), '12,345');
  await assertStalled(page, 'escalate');

  // A human may judge the work finished whatever the reflector chose: "End as done".
  await card.locator('button', { hasText: 'End as done' }).click();
  await page.waitForURL(new RegExp(`/goals/${goalId}$`));
  await page.locator('#goal-status', { hasText: 'done' }).waitFor();
  assert.equal((await fleet.client.get(goalId)).status, 'done');
  assert.equal(await page.locator('#decisions .decision-card').count(), 0, 'nothing left to decide');

  // With `stall.action: fail` the goal ends failed, saying the same.
  const failed = await cycleThree('Summarise the flaky notes again');
  for (const e of cycleThreeEvents(failed)) await fleet.client.goals.appendEvent(failed, e);
  await fleet.client.lifecycle.beginReflecting(failed);
  assert.ok(await fleet.client.lifecycle.failStalled(failed, stalledDecision('fail')));
  await page.goto(`${ui.url}/goals/${failed}`);
  assert.equal(await text(page, '#goal-status'), 'failed');
  await assertStalled(page, 'fail');
  assert.deepEqual(problems, []);
  await page.close();
});

test("a page's answer to a pause the goal has left (another human resumed, it paused again) is refused", async () => {
  const goalId = await fleet.client.enqueue({ goal: 'a goal reviewed after every cycle', review: true });
  const paused = async (pauses: number) => {
    const g = await fleet.client.get(goalId);
    return g.status === 'awaiting_human' && g.pauses === pauses;
  };
  await until(() => paused(1), 'the first review', 30_000);
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${goalId}`);
  const resumeForm = '#decisions form[action*="/resume"]';
  const stale = (await page.getAttribute(resumeForm, 'action'))!;
  assert.match(stale, /\/resume\?pause=1$/);
  const csrf = await page.locator(`${resumeForm} input[name=_csrf]`).inputValue();
  const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');

  // Another human answers first; the goal runs its next cycle and is reviewed again.
  await fleet.client.resume(goalId);
  await until(() => paused(2), 'the second review', 30_000);
  // The live card now answers the new pause.
  await page.locator('#decisions form[action$="/resume?pause=2"]').waitFor({ timeout: 10_000 });

  // The answer the first page would have sent: refused, the goal left with the human.
  const headers = { cookie, 'x-csrf-token': csrf };
  for (const action of [stale, stale.replace('/resume', '/end')]) {
    const res = await fetch(`${ui.url}${action}`, {
      method: 'POST',
      body: new FormData(),
      headers,
      redirect: 'manual',
    });
    assert.equal(res.status, 409, action);
    assert.match(await res.text(), /paused again \(for review\) since the pause this answers: not resumed/);
  }
  const g = await fleet.client.get(goalId);
  assert.deepEqual([g.status, g.pauses], ['awaiting_human', 2]);
  // The page's own answer to the pause it shows goes through.
  await page.click('#decisions form[action$="/end?pause=2"] button');
  await page.locator('#goal-status', { hasText: 'done' }).waitFor({ timeout: 10_000 });
  assert.deepEqual(problems, []);
  await page.close();
});
