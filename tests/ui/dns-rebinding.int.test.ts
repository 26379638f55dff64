// DNS rebinding against an inspector without a token: a page on evil.example, whose name the
// attacker makes resolve to 127.0.0.1, is same-origin with what it fetches there, so only the
// Host header tells it from the user's own tab. The browser is told to resolve evil.example to
// 127.0.0.1 (--host-resolver-rules), as a rebinding DNS server would make it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { useRedis } from '../../testing/redis.ts';
import { launchBrowser, type UiProc, useInspector } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
let rebound: Browser;
let goalId: string;
const GOAL_TEXT = 'A goal only the user may see';

useInspector(redis, {}, async (x) => {
  ({ client, ui } = x);
  goalId = newGoalId();
  await client.goals.create(goalId, GOAL_TEXT, {}, false);
});
before(async () => {
  rebound = await launchBrowser(['--host-resolver-rules=MAP evil.example 127.0.0.1']);
});
after(async () => rebound?.close());

test('a page served as evil.example can neither read the inspector nor act through it', async () => {
  const page = await rebound.newPage();
  const evil = `http://evil.example:${ui.port}`;
  const res = await page.goto(`${evil}/goals/${goalId}`);
  assert.equal(res?.status(), 403);
  // The refusal carries the security headers every other answer does.
  const headers = res!.headers();
  assert.equal(headers['x-content-type-options'], 'nosniff');
  assert.match(headers['content-security-policy'] ?? '', /default-src 'none'|script-src 'self'/);
  const body = await page.content();
  assert.doesNotMatch(body, new RegExp(GOAL_TEXT));
  assert.match(body, /DEEPQ_UI_TOKEN/);
  // What its script would try next: post the cancel form on its own (rebound) origin.
  const status = await page.evaluate(
    async (path) => (await fetch(path, { method: 'POST', body: new URLSearchParams({ _csrf: 'x' }) })).status,
    `/goals/${goalId}/cancel`,
  );
  assert.equal(status, 403);
  assert.equal((await client.get(goalId)).status, 'queued');
  await page.close();
});

test('the loopback names the user types still reach it: 127.0.0.1 and localhost', async () => {
  const page = await rebound.newPage();
  for (const host of ['127.0.0.1', 'localhost']) {
    const res = await page.goto(`http://${host}:${ui.port}/goals/${goalId}`);
    assert.equal(res?.status(), 200, host);
    const css = await page.request.get(`http://${host}:${ui.port}/static/ui.css`);
    assert.equal(css.headers()['cache-control'], 'private, max-age=300', 'no shared cache keeps its CSRF cookie');
    assert.match(await page.content(), new RegExp(GOAL_TEXT), host);
  }
  await page.close();
});
