// The inspector's enqueue form with files, in a real browser: the files become the goal's input
// files (as `enqueue --file` makes them), a file that is not text is refused on the page with
// nothing stored, and a body past the form's limit is a 413 that says the limit. One Redis, one
// UI process, one browser; no services (the goals stay queued).

import assert from 'node:assert/strict';
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
  await page.fill('form.enqueue textarea[name=goal]', 'With a binary file');
  await page.setInputFiles('form.enqueue input[name=files]', [
    file('ok.md', 'fine'),
    file('logo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01])),
  ]);
  await page.click('form.enqueue button');
  await page.locator('form.enqueue p.error').waitFor();
  const error = await page.locator('form.enqueue p.error').textContent();
  assert.equal(error, 'file "logo.png": looks binary (a NUL byte): artifacts are text');
  assert.equal(await page.locator('form.enqueue textarea[name=goal]').inputValue(), 'With a binary file', 'kept');
  assert.equal((await client.list()).length, before, 'no goal');
  await page.close();
});

test("a body past the limit is a 413 naming it: the form's files 16 MiB in all, other forms' text alone", async () => {
  const page = await browser.newPage();
  await page.goto(`${ui.url}/`);
  const csrf = await page.locator('form.enqueue input[name=_csrf]').inputValue();
  const cookies = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
  const post = (path: string, body: FormData) =>
    fetch(`${ui.url}${path}`, { method: 'POST', body, headers: { cookie: cookies, 'x-csrf-token': csrf } });
  const form = (bytes: number) => {
    const f = new FormData();
    f.set('goal', 'big');
    f.set('files', new Blob([Buffer.alloc(bytes, 'a')]), 'big.md');
    return f;
  };
  // 1 MiB: over any other form's limit, well under the enqueue form's (whose VFS takes 5 MB files).
  const fits = await post('/goals', form(1024 * 1024));
  assert.equal(fits.status, 200, 'followed to the new goal');
  assert.match(new URL(fits.url).pathname, /^\/goals\/[0-9a-f]{12}$/);
  const big = await post('/goals', form(17 * 1024 * 1024));
  assert.equal(big.status, 413);
  assert.match(await big.text(), /a goal&#39;s text is at most 100 KB and its files at most 16 MiB in all/);
  const elsewhere = await post(`/goals/${new URL(fits.url).pathname.split('/').pop()}/cancel`, form(1024 * 1024));
  assert.equal(elsewhere.status, 413);
  assert.doesNotMatch(await elsewhere.text(), /files/);
  await page.close();
});
