// The inspector's safety, in a real browser: with DEEPQ_UI_TOKEN set every request needs it
// (401 without, an HttpOnly session cookie after signing in); state-changing requests from
// another origin, or without the page's CSRF token, are refused; goal text, instructions,
// artifact names and contents, reasons and transcripts holding <script>, <img onerror> and a
// javascript: link show as text and never run, on first render and when patched in live; the
// UI will not listen off loopback without a token; its request log never holds the token.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import { after, test } from 'node:test';
import type { Browser, BrowserContext } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { freePort } from '../../cli/private-redis.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { runCli, startProcess, stopProcess } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { recordMisbehaviour, type UiProc, useInspector } from './harness.ts';

const HOSTILE =
  `<script>window.pwned='script';alert('script')</script>` +
  `<img src=x onerror="window.pwned='img';alert('img')">` +
  `<a href="javascript:window.pwned='link';alert('link')">click me</a>`;
/** A name deepq's VFS would refuse, planted straight into a goal's index. */
const HOSTILE_NAME = `<img src=x onerror="window.pwned='name';alert('name')">.md`;
const TOKEN = randomBytes(24).toString('hex');
/** The model API key the inspector's process holds: no page may show it. */
const API_KEY = `sk-ant-canary-${randomBytes(8).toString('hex')}`;

const redis = useRedis();
let env: NodeJS.ProcessEnv;
let client: GoalClient;
let ui: UiProc;
let browser: Browser;
let signedIn: BrowserContext;
let goalId: string;
let workerThread: string;
const servers: Server[] = [];

useInspector(redis, { DEEPQ_UI_TOKEN: TOKEN, ANTHROPIC_API_KEY: API_KEY }, async (x) => {
  ({ env, client, ui, browser } = x);
  ({ goalId, workerThread } = await plantHostileGoal());
});
after(() => {
  for (const s of servers) s.close();
});

/**
 * A goal escalated after one cycle, every model- or user-written field hostile: goal text,
 * instruction, artifact name and content, reflection reason, a transcript. Written with
 * deepq's own stores and transitions; no service runs in this file.
 */
async function plantHostileGoal(): Promise<{ goalId: string; workerThread: string }> {
  const id = newGoalId();
  const keys = client.goals.keys;
  const role = 'research-specialist';
  const planner = threadIdFor(id, 'planner', 'aaaa1111');
  const worker = threadIdFor(id, role, 'bbbb2222');
  const plan = {
    subtasks: [{ role, instruction: `Research ${HOSTILE}`, expected_artifact: 'notes.md', read_files: [] }],
  };
  await client.goals.create(id, `Goal ${HOSTILE}`, {}, false);
  await client.lifecycle.beginPlanning(id);
  await client.lifecycle.dispatch(id, 1, plan, { threadId: planner });
  const ref = { step: 1, index: 0, role, artifact: 'notes.md', threadId: worker };
  await client.goals.appendEvent(id, { type: 'subtask_started', ...ref, attempt: 1 });
  await client.vfs.write(id, 'notes.md', `Notes ${HOSTILE}`, {
    status: 'done',
    step: 1,
    role,
    threadId: worker,
    writer: 'w',
  });
  await client.goals.appendEvent(id, { type: 'subtask_finished', ...ref, bytes: 10, ms: 5 });
  await client.lifecycle.beginReflecting(id);
  const reflection = { decision: 'escalate' as const, reason: `Reason ${HOSTILE}` };
  await client.lifecycle.awaitHuman(
    id,
    { step: 1, reflection, outcomes: [{ index: 0, status: 'done' }] },
    'escalation',
  );
  const entry = { status: 'done', step: 1, bytes: 42, role: `role ${HOSTILE}`, version: 1, updatedAt: Date.now() };
  await redis.client.hset(keys.files(id), HOSTILE_NAME, JSON.stringify(entry));
  await redis.client.hset(keys.content(id), HOSTILE_NAME, `Content ${HOSTILE}`);
  const messages = [
    { role: 'user', content: `Task ${HOSTILE}` },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: `Answer ${HOSTILE}` },
        { type: 'tool_use', id: 'toolu_1', name: 'grep', input: { pattern: HOSTILE } },
      ],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: HOSTILE, is_error: true }] },
  ];
  const transcript = { threadId: worker, role, savedAt: Date.now(), messages };
  await redis.client.set(keys.transcript(id, worker), JSON.stringify(transcript));
  await redis.client.zadd(keys.threads(id), Date.now(), worker);
  return { goalId: id, workerThread: worker };
}

/** What a page holds that would mean a payload became markup. */
async function assertInert(page: import('playwright-core').Page, where: string): Promise<void> {
  assert.equal(await page.evaluate('typeof window.pwned'), 'undefined', `${where}: a payload ran`);
  assert.equal(await page.locator('main img').count(), 0, `${where}: an <img> from data`);
  assert.equal(await page.locator('a[href^="javascript:" i]').count(), 0, `${where}: a javascript: link`);
  const scripts = await page.evaluate<string[]>('[...document.scripts].map((s) => s.src || "inline")');
  assert.ok(
    scripts.every((s) => s.endsWith('/static/goal-live.mjs')),
    `${where}: scripts ${scripts}`,
  );
}

test('signing in: a page without the token is a 401 login form; the session cookie is HttpOnly', async () => {
  signedIn = await browser.newContext();
  const page = await signedIn.newPage();
  const first = await page.goto(`${ui.url}/goals/${goalId}`);
  assert.equal(first!.status(), 401);
  assert.equal(await page.locator('form.login input[name=token]').count(), 1);
  await page.fill('form.login input[name=token]', 'not-the-token-at-all');
  const refused = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/login')),
    page.click('form.login button'),
  ]);
  assert.equal(refused[0].status(), 401);
  await page.fill('form.login input[name=token]', TOKEN);
  await page.click('form.login button');
  await page.waitForURL(`${ui.url}/goals/${goalId}`);
  assert.equal(await page.locator('#goal-status').textContent(), 'awaiting_human');
  const session = (await signedIn.cookies()).find((c) => c.name === 'deepq_ui_session');
  assert.ok(session, 'a session cookie');
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, 'Strict');
  assert.ok(!session.value.includes(TOKEN), 'the cookie must not hold the token');
  await page.close();
});

test('signing out ends the session: a copy of its cookie no longer signs in, the other sessions go on', async () => {
  const leaving = await browser.newContext();
  const page = await leaving.newPage();
  await page.goto(`${ui.url}/login`);
  await page.fill('form.login input[name=token]', TOKEN);
  await page.click('form.login button');
  await page.waitForURL(`${ui.url}/`);
  const cookie = (await leaving.cookies()).find((c) => c.name === 'deepq_ui_session')!.value;
  const headers = { cookie: `deepq_ui_session=${cookie}` };
  const withCopy = () => fetch(`${ui.url}/goals/${goalId}`, { headers });
  assert.equal((await withCopy()).status, 200, 'the copy works while signed in');
  // A page open in another tab, its live stream open.
  const stream = await fetch(`${ui.url}/goals/${goalId}/events`, { headers, signal: AbortSignal.timeout(15_000) });
  assert.equal(stream.status, 200);
  await page.click('form[action="/logout"] button');
  await page.waitForURL(`${ui.url}/login`);
  assert.equal((await withCopy()).status, 401, 'the copy after signing out');
  // The open stream ends within a re-read (2 s), not when the goal does.
  const started = Date.now();
  await stream.text();
  assert.ok(Date.now() - started < 10_000, 'the stream went on after the sign-out');
  // A form sent from that tab: the sign-in form, saying the action was not done, back to its page.
  const form = await fetch(`${ui.url}/goals/${goalId}/cancel`, {
    method: 'POST',
    headers: { ...headers, accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
    body: '_csrf=x',
  });
  assert.equal(form.status, 401);
  const html = await form.text();
  assert.match(html, /Your session has ended: sign in again, then repeat what you did \(it was not done\)/);
  assert.match(html, new RegExp(`name="next" value="/goals/${goalId}"`));
  const other = await signedIn.newPage();
  assert.equal((await other.goto(`${ui.url}/goals/${goalId}`))!.status(), 200, 'another session');
  await Promise.all([other.close(), leaving.close()]);
});

test('hostile goal text, instructions, names, contents, reasons, transcripts show as text, never run', async () => {
  assert.ok(signedIn, 'needs the signed-in context');
  const page = await signedIn.newPage();
  const problems = recordMisbehaviour(page);

  await page.goto(`${ui.url}/`);
  // The table shows the first 160 characters of a goal's text.
  assert.equal(await page.locator('tr.goal-row td.text').first().textContent(), `Goal ${HOSTILE}`.slice(0, 160));
  await assertInert(page, 'goals');

  await page.goto(`${ui.url}/goals/${goalId}`);
  await page.locator('#live-state[data-state="live"]').waitFor();
  assert.equal(await page.locator('.goal-text').textContent(), `Goal ${HOSTILE}`);
  assert.equal(await page.locator('#cycle-1 td.instruction').textContent(), `Research ${HOSTILE}`);
  assert.equal(await page.locator('#cycle-1 .reflection .reason').textContent(), `Reason ${HOSTILE}`);
  assert.equal(await page.locator('#decisions .detail').textContent(), `Reason ${HOSTILE}`);
  assert.equal(await page.locator(`#artifact-rows tr[data-name="${HOSTILE_NAME.replace(/"/g, '\\"')}"]`).count(), 1);
  await assertInert(page, 'goal page');

  // Patched in live by the client script: a hostile eviction, and the decision re-rendered.
  await client.goals.appendEvent(goalId, { type: 'evicted', step: 1, name: HOSTILE_NAME, reason: 'done_aged' });
  await page.locator('#cycle-1 .evicted', { hasText: HOSTILE_NAME }).waitFor();
  assert.equal(await page.locator('#cycle-1 .evicted').textContent(), `Evicted: ${HOSTILE_NAME}`);
  assert.ok((await page.locator('#activity-log li').last().textContent())!.includes(HOSTILE_NAME));
  assert.equal(await page.locator('#decisions .detail').textContent(), `Reason ${HOSTILE}`);
  await assertInert(page, 'goal page after live updates');

  await page.click(`#artifact-rows a:text-is(${JSON.stringify(HOSTILE_NAME)})`);
  assert.equal(await page.locator('.artifact-name').textContent(), HOSTILE_NAME);
  assert.equal(await page.locator('#artifact-content').textContent(), `Content ${HOSTILE}`);
  assert.equal(await page.locator('.artifact-meta .role').textContent(), `role ${HOSTILE}`);
  await assertInert(page, 'hostile artifact');
  const raw = await page.request.get(`${ui.url}/goals/${goalId}/artifact/raw?name=${encodeURIComponent(HOSTILE_NAME)}`);
  assert.equal(raw.headers()['content-type'], 'application/octet-stream');
  assert.match(raw.headers()['content-security-policy']!, /sandbox/);

  await page.goto(`${ui.url}/goals/${goalId}/artifact?name=notes.md`);
  assert.equal(await page.locator('#artifact-content').textContent(), `Notes ${HOSTILE}`);
  await assertInert(page, 'notes.md');

  await page.goto(`${ui.url}/transcripts/${workerThread}`);
  for (const d of await page.locator('details').all()) await d.locator('summary').click();
  const transcript = (await page.locator('.transcript').textContent())!;
  for (const part of [`Task ${HOSTILE}`, `Answer ${HOSTILE}`, JSON.stringify(HOSTILE)]) {
    assert.ok(transcript.includes(part), `transcript shows ${part.slice(0, 40)}`);
  }
  await assertInert(page, 'transcript');
  assert.deepEqual(problems, [], 'no dialog, console message or page error');
  await page.close();
});

/** Every page and API of the inspector, for the planted goal. */
const pageRoutes = () => [
  '/',
  `/goals/${goalId}`,
  `/goals/${goalId}/artifact?name=notes.md`,
  `/goals/${goalId}/artifact/raw?name=notes.md`,
  `/transcripts/${workerThread}`,
  '/queues-overview',
  '/queues',
  '/queues/api/queues',
];

test('without the token every route answers 401; with it as a bearer, 200', async () => {
  const routes = [...pageRoutes(), `/goals/${goalId}/events`, '/static/goal-live.mjs'];
  for (const r of routes) {
    const none = await fetch(`${ui.url}${r}`);
    assert.equal(none.status, 401, `${r} without the token`);
    await none.body?.cancel();
    const wrong = await fetch(`${ui.url}${r}`, { headers: { authorization: `Bearer ${TOKEN.slice(1)}x` } });
    assert.equal(wrong.status, 401, `${r} with a wrong token`);
    await wrong.body?.cancel();
    const forged = await fetch(`${ui.url}${r}`, {
      headers: { cookie: `deepq_ui_session=1.${'b'.repeat(32)}.${'a'.repeat(64)}` },
    });
    assert.equal(forged.status, 401, `${r} with a forged session`);
    await forged.body?.cancel();
    const ok = await fetch(`${ui.url}${r}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200, `${r} with the token`);
    await ok.body?.cancel();
  }
  const post = await fetch(`${ui.url}/goals/${goalId}/cancel`, { method: 'POST' });
  assert.equal(post.status, 401);
  const page = await fetch(`${ui.url}/`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const csp = page.headers.get('content-security-policy')!;
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.equal((await fetch(`${ui.url}/login`)).status, 200, 'the login form is open');
  assert.equal((await client.get(goalId)).status, 'awaiting_human');
});

test('no page or API answer carries a secret: neither the UI token nor the API key', async () => {
  for (const r of [...pageRoutes(), '/login']) {
    const res = await fetch(`${ui.url}${r}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200, r);
    const body = await res.text();
    assert.ok(body.length > 0, `${r} answered something`);
    for (const secret of [TOKEN, API_KEY]) assert.ok(!body.includes(secret), `${r} shows a secret`);
    for (const [name, value] of res.headers) assert.ok(!value.includes(TOKEN), `${r}: header ${name}`);
  }
  const metrics = await (await fetch(`http://127.0.0.1:${ui.svc.port}/metrics`)).text();
  for (const secret of [TOKEN, API_KEY]) assert.ok(!metrics.includes(secret), '/metrics shows a secret');
});

/** A page on another origin whose form posts to the inspector as soon as it loads. */
async function attackerSite(action: string): Promise<number> {
  const port = await freePort();
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<form id="f" method="post" action="${action}"><input name="note" value="x"></form>
      <script>document.getElementById('f').submit()</script>`);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return port;
}

test('without the token an upload is refused before its body is read; a sign-in body is 8 KiB at most', async () => {
  // A chunked body was held whole while measured (16 MiB a request): 50 such, 0.9 GB, no token.
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(`${ui.url}/goals`, { method: 'POST', headers: { 'transfer-encoding': 'chunked' } });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode!);
      req.destroy();
    });
    req.on('error', reject);
    req.write(Buffer.alloc(1024 * 1024, 'x')); // and never ends: only an answer before the body ends
    setTimeout(() => reject(new Error('no answer while the body was still coming')), 10_000).unref();
  });
  assert.equal(status, 401);
  // A signed-in client that leaves mid-upload is logged as gone (499), not as the inspector's 500.
  const leaving = request(`${ui.url}/goals`, {
    method: 'POST',
    headers: { 'transfer-encoding': 'chunked', authorization: `Bearer ${TOKEN}` },
  });
  leaving.on('error', () => {});
  leaving.write('goal=x');
  setTimeout(() => leaving.destroy(), 300);
  await until(() => /client went away before its request was read/.test(ui.svc.output()), 10_000, 'the leaving logged');
  assert.doesNotMatch(ui.svc.output(), /request failed/);
  const body = new URLSearchParams({ token: 'x'.repeat(9000) });
  const login = await fetch(`${ui.url}/login`, { method: 'POST', body });
  assert.equal(login.status, 413);
  assert.match(await login.text(), /over 8 KiB: the sign-in form holds a token/);
});

test('cross-site POSTs and POSTs without the CSRF token are refused; with it they pass', async () => {
  assert.ok(signedIn, 'needs the signed-in context');
  const cancel = `${ui.url}/goals/${goalId}/cancel`;
  const attacker = await attackerSite(cancel);
  const page = await signedIn.newPage();
  // Same site (127.0.0.1), another origin: the session cookie goes along, the CSRF check refuses.
  let [res] = await Promise.all([page.waitForResponse(cancel), page.goto(`http://127.0.0.1:${attacker}/`)]);
  assert.equal(res.status(), 403);
  assert.match(await res.text(), /forbidden/);
  // Another site (localhost): SameSite=Strict keeps the cookie home.
  [res] = await Promise.all([page.waitForResponse(cancel), page.goto(`http://localhost:${attacker}/`)]);
  assert.equal(res.status(), 401);

  // From the inspector's own origin, but without the token: refused too.
  await page.goto(`${ui.url}/goals/${goalId}`);
  const statusOf = (js: string) => page.evaluate<number>(`${js}.then((r) => r.status)`);
  assert.equal(await statusOf(`fetch('/goals/${goalId}/cancel', { method: 'POST' })`), 403);
  assert.equal(await statusOf(`fetch('/queues/api/queues/plan/pause', { method: 'PUT' })`), 403);
  // With the page's token the request gets through to the route (which refuses an empty goal).
  const withToken = `fetch('/goals', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded',
    'x-csrf-token': document.querySelector('meta[name="csrf-token"]').content }, body: 'goal=' })`;
  assert.equal(await statusOf(withToken), 400);
  assert.equal((await client.get(goalId)).status, 'awaiting_human', 'nothing was cancelled');

  // A non-browser client with the token: an Origin of another host is refused, none is fine.
  const csrf = 'c'.repeat(64);
  const headers = {
    authorization: `Bearer ${TOKEN}`,
    cookie: `deepq_csrf=${csrf}`,
    'content-type': 'application/x-www-form-urlencoded',
  };
  const body = `_csrf=${csrf}&goal=`;
  const evil = await fetch(`${ui.url}/goals`, {
    method: 'POST',
    headers: { ...headers, origin: 'http://evil.example' },
    body,
  });
  assert.equal(evil.status, 403);
  assert.equal((await fetch(`${ui.url}/goals`, { method: 'POST', headers, body })).status, 400);
  await page.close();
});

test('the inspector refuses to listen off loopback without a token, or with a short one', async () => {
  const bare = { ...env };
  delete bare.DEEPQ_UI_TOKEN;
  const r = await runCli(['ui', '--host', '0.0.0.0', '--port', '0'], bare);
  assert.equal(r.code, 78, r.stdout + r.stderr);
  assert.match(r.stderr, /refusing to listen on 0\.0\.0\.0 without DEEPQ_UI_TOKEN/);
  const short = await runCli(['ui', '--host', '0.0.0.0', '--port', '0'], { ...bare, DEEPQ_UI_TOKEN: 'short' });
  assert.equal(short.code, 78);
  assert.match(short.stderr, /DEEPQ_UI_TOKEN is 5 characters/);
});

test('a port in use stops the inspector: exit 78 naming --port (a misspelt variable named)', async () => {
  const port = new URL(ui.url).port;
  const r = await runCli(['ui', '--port', port], { ...env, DEEPQ_MAX_TOKEN: '5' });
  assert.equal(r.code, 78, r.stdout + r.stderr);
  // A misspelt variable is named first, as by every other command.
  assert.match(r.stdout, /ignoring DEEPQ_MAX_TOKEN \(did you mean DEEPQ_MAX_TOKENS\?\)/);
  assert.match(r.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is in use .*: pick another with --port`));
  assert.doesNotMatch(r.stderr, /EADDRINUSE|\n\s+at /);
});

test('bound to every address, the inspector gives a metrics link that opens (loopback, not 0.0.0.0)', async () => {
  const svc = startProcess('ui-everywhere', ['ui', '--port', '0'], { ...env, METRICS_HOST: '0.0.0.0' });
  try {
    const line = /deepq ui: metrics (\S+)/;
    await until(() => line.test(svc.output()), 30_000, 'the metrics line');
    const link = line.exec(svc.output())![1]!;
    assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.equal((await fetch(link)).status, 200);
  } finally {
    await stopProcess(svc);
  }
});

test('one log line per request, never with the token or a session', async () => {
  const lines = ui.svc
    .output()
    .split('\n')
    .filter((l) => l.includes('"msg":"request"'));
  assert.ok(lines.length > 20, `request lines: ${lines.length}`);
  const line = JSON.parse(lines.find((l) => l.includes('"route":"/goals/:id"'))!);
  assert.deepEqual(Object.keys(line).filter((k) => ['method', 'path', 'route', 'status', 'ms'].includes(k)).length, 5);
  const session = (await signedIn.cookies()).find((c) => c.name === 'deepq_ui_session')!.value;
  assert.ok(!ui.svc.output().includes(TOKEN), 'the token is in the log');
  assert.ok(!ui.svc.output().includes(session), 'a session is in the log');
});
