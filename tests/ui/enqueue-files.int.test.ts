// The inspector's enqueue form with files, in a real browser: the files become the goal's input
// files (as `enqueue --file` makes them), a file that is not text is refused on the page with
// nothing stored, and a body past the form's limit is a 413 that says the limit. One Redis, one
// UI process, one browser; no services (the goals stay queued).

import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { GoalClient } from '../../cli/goal-client.ts';
import { useRedis } from '../../testing/redis.ts';
import { recordMisbehaviour, type UiProc, useInspector } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
let browser: Browser;

useInspector(redis, {}, (x) => ({ client, ui, browser } = x));

const file = (name: string, content: string | Buffer) => ({
  name,
  mimeType: 'text/plain',
  buffer: Buffer.isBuffer(content) ? content : Buffer.from(content),
});

test("the form's files are the goal's input files; the goal page lists them as input", async () => {
  const page = await browser.newPage();
  const problems = recordMisbehaviour(page);
  await page.goto(`${ui.url}/`);
  await page.fill('form.enqueue textarea[name=goal]', 'Review the attached code');
  await page.setInputFiles('form.enqueue input[name=files]', [
    file('app.py', 'print("hi")  # MARKER-APP\n'),
    file('spec.md', '# Spec\nsort values: é, ü\n'),
  ]);
  await page.click('form.enqueue button');
  await page.waitForURL(/\/goals\/[0-9a-f]{24}$/);
  const goalId = page.url().split('/').pop()!;
  const files = await client.artifacts(goalId);
  assert.deepEqual(
    files.map((f) => [f.name, f.status, f.step, f.input, f.writer]),
    [
      ['app.py', 'done', 0, true, 'input'],
      ['spec.md', 'done', 0, true, 'input'],
    ],
  );
  assert.equal(await client.read(goalId, 'spec.md'), '# Spec\nsort values: é, ü\n');
  const row = page.locator('tr.artifact-row[data-name="app.py"]');
  assert.equal((await row.locator('td.role').textContent())?.trim(), 'input');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a file that is not text is refused on the page, naming it; nothing is stored', async () => {
  const page = await browser.newPage();
  const before = (await client.list()).length;
  await page.goto(`${ui.url}/`);
  // Right-to-left text carries bidi isolates: given back as typed, not as the escapes a page shows.
  const goal = 'With a binary file: translate \u2067שלום\u2069';
  await page.fill('form.enqueue textarea[name=goal]', goal);
  await page.setInputFiles('form.enqueue input[name=files]', [
    file('ok.md', 'fine'),
    file('logo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01])),
  ]);
  await page.click('form.enqueue button');
  await page.locator('form.enqueue p.error').waitFor();
  const error = await page.locator('form.enqueue p.error').textContent();
  assert.equal(error, 'file "logo.png": looks binary (a NUL byte): artifacts are text');
  assert.equal(await page.locator('form.enqueue textarea[name=goal]').inputValue(), goal, 'kept as typed');
  assert.equal((await client.list()).length, before, 'no goal');
  await page.close();
});

/**
 * A multipart POST whose answer may come before all of its body is sent (a limit refuses it on its
 * Content-Length): the answer, whatever the rest of the write does (the server may close the
 * connection under it, an EPIPE that fetch would report instead of the answer).
 */
function postEarly(url: string, headers: Record<string, string>, fileBytes: number) {
  const boundary = `deepq${Date.now()}`;
  const part = (head: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; ${head}\r\n\r\n`);
  const body = Buffer.concat([
    part('name="goal"'),
    Buffer.from('big\r\n'),
    part('name="files"; filename="big.md"'),
    Buffer.alloc(fileBytes, 'a'),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const type = `multipart/form-data; boundary=${boundary}`;
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-type': type } });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('close', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    // The server answers and closes before the body is all sent: the rest of the write fails
    // (EPIPE) on the socket, after the request has let go of it. Expected here, not a failure.
    req.on('socket', (socket) => socket.on('error', () => {}));
    req.end(body);
  });
}

test('a body past the limit is a 413 naming it (files 16 MiB, other forms text alone); garbled a 400', async () => {
  const page = await browser.newPage();
  await page.goto(`${ui.url}/`);
  const csrf = await page.locator('form.enqueue input[name=_csrf]').inputValue();
  const cookies = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
  const headers = { cookie: cookies, 'x-csrf-token': csrf };
  const form = new FormData();
  form.set('goal', 'big');
  form.set('files', new Blob([Buffer.alloc(1024 * 1024, 'a')]), 'big.md');
  // 1 MiB: over any other form's limit, well under the enqueue form's (whose VFS takes 5 MB files).
  const fits = await fetch(`${ui.url}/goals`, { method: 'POST', body: form, headers });
  assert.equal(fits.status, 200, 'followed to the new goal');
  const goalId = new URL(fits.url).pathname.split('/').pop()!;
  assert.match(goalId, /^[0-9a-f]{12}$/);
  const big = await postEarly(`${ui.url}/goals`, headers, 17 * 1024 * 1024);
  assert.equal(big.status, 413);
  assert.match(big.text, /a goal&#39;s text is at most 100 KB and its files at most 16 MiB in all/);
  const elsewhere = await postEarly(`${ui.url}/goals/${goalId}/cancel`, headers, 1024 * 1024);
  assert.equal(elsewhere.status, 413);
  assert.match(elsewhere.text, /a goal&#39;s text is at most 100 KB\./);
  // A body that is not the multipart it says it is: the client's mistake, named.
  const garbled = { ...headers, 'content-type': 'multipart/form-data; boundary=zzz' };
  for (const route of ['/goals', `/goals/${goalId}/resume`]) {
    const res = await fetch(`${ui.url}${route}`, { method: 'POST', body: 'garbage', headers: garbled });
    assert.equal(res.status, 400, route);
    assert.match(await res.text(), /The form could not be read: its body is not valid form data\./);
  }
  await page.close();
});
