// Tool calls waiting for a human, on the Goal page: each pending call is a decision with its
// tool and input (model text, shown as text) and Approve / Reject buttons that do what
// `deepq approve|reject` do; a request made while the page is open shows up live. The
// requests are written with deepq's approval store (as a paused worker writes them); no
// service runs here, so no job wakes up: the records and the timeline are what is checked.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { type ApprovalRecord, inputPreview, type JobCheckpoint, newCallId } from '../../shared/goal/approvals.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import { useRedis } from '../../testing/redis.ts';
import { recordMisbehaviour, type UiProc, useInspector } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
let browser: Browser;
const ROLE = 'code-writer';
/** A write whose harmless start fills the 300-char preview; what it really does comes after. */
const TOOL_INPUT = {
  name: 'x.py',
  // Between two Arabic letter marks (invisible, right to left) the ">" is drawn as "<": a read.
  shell: 'cat \u061c>\u061c /etc/app/config.yml',
  note: 'a harmless comment. '.repeat(20),
  // A right-to-left override would draw what follows it reversed ("Trojan Source").
  content: '<img src=x onerror="window.pwned=1"> import os; os.system("rm -rf /srv/data") \u202e# harmless',
  // Invisible: a zero-width space inside a host name, and tag characters (text no one sees).
  url: 'https://exa\u200bmple.com/\u{e0041}\u{e0042}',
};
const INPUT = inputPreview(TOOL_INPUT);

useInspector(redis, {}, (x) => ({ client, ui, browser } = x));

/** A goal running its first cycle with two started subtasks. */
async function runningGoal(): Promise<string> {
  const id = newGoalId();
  const task = (n: number) => ({ role: ROLE, instruction: `part ${n}`, expected_artifact: `p${n}.py`, read_files: [] });
  const plan = { subtasks: [task(0), task(1)] };
  await client.goals.create(id, 'Write two files, carefully', {}, false);
  await client.lifecycle.beginPlanning(id);
  await client.lifecycle.dispatch(id, 1, plan, { threadId: threadIdFor(id, 'planner', 'aaaa1111') });
  for (const index of [0, 1]) {
    const ref = { step: 1, index, role: ROLE, artifact: `p${index}.py`, threadId: threadIdFor(id, ROLE, `t${index}`) };
    await client.goals.appendEvent(id, { type: 'subtask_started', ...ref, attempt: 1 });
  }
  return id;
}

/** What a worker writes when subtask `index` pauses on a write_file call. */
async function requestApproval(goalId: string, index: number): Promise<string> {
  const callId = newCallId();
  const now = Date.now();
  const threadId = threadIdFor(goalId, ROLE, `t${index}`);
  const record: ApprovalRecord = {
    callId,
    jobId: subtaskJobId(goalId, 1, index),
    queue: subagentQueueName(ROLE),
    role: ROLE,
    step: 1,
    index,
    threadId,
    tool: 'write_file',
    input: INPUT,
    requestedAt: now,
    expiresAt: now + 3600_000,
    status: 'pending',
  };
  const uses = [{ type: 'tool_use' as const, id: `toolu_${index}`, name: 'write_file', input: TOOL_INPUT }];
  const agent = { messages: [], turns: 1, phaseTurns: 1, contractRetry: false, uses, awaiting: [] };
  const checkpoint: JobCheckpoint = { threadId, startedAt: now, calls: [{ index: 0, callId }], agent };
  assert.deepEqual(await client.approvals.request(goalId, record.jobId, checkpoint, [record]), { kind: 'ok' });
  return callId;
}

const card = (page: Page, callId: string) => page.locator(`#decision-approval-${callId}`);

test('pending tool calls are decisions on the goal page: approve, reject with a reason, live', async () => {
  const goalId = await runningGoal();
  const first = await requestApproval(goalId, 0);
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.match((await card(page, first).locator('.title').textContent())!, /write_file \(cycle 1, subtask 0/);
  // The whole input, as text: the preview (cut at 300 chars) hides what approving would run.
  assert.ok(!INPUT.includes('rm -rf'), 'the preview is cut before the end');
  const shown = (await card(page, first).locator('.content').textContent())!;
  assert.deepEqual(JSON.parse(shown), TOOL_INPUT);
  assert.doesNotMatch(shown, /[\u202a-\u202e\u2066-\u2069]/, 'a bidi override reached the page');
  assert.match(shown, /\\u202e# harmless/, 'the override is shown as an escape');
  assert.doesNotMatch(shown, /[\u200b\u{e0000}-\u{e007f}]/u, 'an invisible character reached the page');
  assert.match(shown, /exa\\u200bmple\.com\/\\udb40\\udc41\\udb40\\udc42/, 'shown as JSON escapes');
  assert.doesNotMatch(shown, /\u061c/, 'a right-to-left mark reached the page');
  assert.match(shown, /cat \\u061c>\\u061c \/etc/, 'the marks are shown as escapes, the > as it runs');
  assert.equal(
    await page.locator('#cycle-1 tr.subtask[data-index="0"]').getAttribute('data-state'),
    'awaiting_approval',
  );

  // A second call asks while the page is open: its decision appears without a reload.
  const second = await requestApproval(goalId, 1);
  await card(page, second).waitFor();
  assert.match((await card(page, second).locator('.content').textContent())!, /rm -rf \/srv\/data/);
  assert.equal(
    await page.locator('#cycle-1 tr.subtask[data-index="1"]').getAttribute('data-state'),
    'awaiting_approval',
  );

  // A reason longer than the model is given is refused whole, not cut: the form says its limit.
  assert.equal(await card(page, first).locator('textarea[name=reason]').getAttribute('maxlength'), '1000');
  const tooLong =
    await page.evaluate<number>(`(() => { const body = new FormData(); body.set('reason', 'r'.repeat(1500));
    return fetch('/goals/${goalId}/approvals/${first}/reject', { method: 'POST', body,
    headers: { 'x-csrf-token': document.querySelector('meta[name="csrf-token"]').content } })
    .then((r) => r.status); })()`);
  assert.equal(tooLong, 409);
  problems.splice(0); // the browser logs that 409: this test asked for it
  assert.equal((await client.approvals.records(goalId)).find((r) => r.callId === first)?.status, 'pending');
  // As long as the form allows, over many lines (the browser sends each line break as two characters).
  const reason = `write to the staging bucket instead\n${'line\n'.repeat(150)}`.padEnd(1000, 'z');
  await card(page, first).locator('textarea[name=reason]').fill(reason);
  await card(page, first).locator('button.danger').click();
  await page.waitForURL(`${ui.url}/goals/${goalId}`);
  await card(page, first).waitFor({ state: 'detached' });
  await card(page, second).locator('button.primary').click();
  await page.waitForURL(`${ui.url}/goals/${goalId}`);
  await page.locator('#cycle-1 tr.subtask[data-index="1"][data-state="running"]').waitFor();
  assert.equal(await page.locator('#decisions .decision-card[data-kind="approval"]').count(), 0);

  const records = new Map((await client.approvals.records(goalId)).map((r) => [r.callId, r]));
  assert.equal(records.get(first)?.status, 'rejected');
  assert.equal(records.get(first)?.reason, reason);
  assert.equal(records.get(second)?.status, 'approved');
  assert.equal(await page.evaluate('typeof window.pwned'), 'undefined');
  assert.deepEqual(problems, []);
  // Deciding again is refused, saying why.
  const again = await page.evaluate<number>(`fetch('/goals/${goalId}/approvals/${first}/approve', { method: 'POST',
    headers: { 'x-csrf-token': document.querySelector('meta[name="csrf-token"]').content } }).then((r) => r.status)`);
  assert.equal(again, 409);
  await page.close();
});

test("an ended goal's waiting call is no decision on its page, and approving it is refused", async () => {
  const goalId = await runningGoal();
  const callId = await requestApproval(goalId, 0);
  // Ended by a path that released nothing yet: the call is still pending in Redis.
  assert.ok(await client.lifecycle.exceedBudget(goalId, 'token budget exceeded', 1));
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state').waitFor();
  assert.equal(await page.locator('#decisions .decision-card[data-kind="approval"]').count(), 0);
  const refused = await page.evaluate<{
    status: number;
    body: string;
  }>(`fetch('/goals/${goalId}/approvals/${callId}/approve',
    { method: 'POST', headers: { 'x-csrf-token': document.querySelector('meta[name="csrf-token"]').content } })
    .then(async (r) => ({ status: r.status, body: await r.text() }))`);
  assert.equal(refused.status, 409);
  assert.match(refused.body, /has ended \(budget_exceeded\): too late to approve/);
  assert.equal((await client.approvals.record(goalId, callId))?.status, 'pending');
  await page.close();
});

test('a page open while its goal ends also shows the calls released just after the end', async () => {
  const goalId = await runningGoal();
  const callId = await requestApproval(goalId, 0);
  const page = await browser.newPage();
  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  // Ended by a path that releases nothing itself; the release comes just after, as a cancel's does.
  assert.ok(await client.lifecycle.exceedBudget(goalId, 'token budget exceeded', 1));
  await page.locator('#live-state[data-state="finished"]').waitFor();
  const ref = { step: 1, index: 0, role: ROLE, threadId: threadIdFor(goalId, ROLE, 't0'), callId, tool: 'write_file' };
  await client.goals.appendEvent(goalId, { type: 'approval_decided', ...ref, decision: 'cancelled' });
  // Written just after the end: the page's stream stays open a moment for it.
  await page.locator('#activity-log li', { hasText: `${callId} (write_file) cancelled` }).waitFor({ timeout: 10_000 });
  await page.close();
});
