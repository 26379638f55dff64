// Shared by tests/ui/*.int.test.ts: the inspector as a real process (`deepq ui`), the system
// Chromium through playwright-core (no browser download), and a page's misbehaviour recorded.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { GoalClient } from '../../cli/goal-client.ts';
import { freePort } from '../../cli/private-redis.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { type ServiceProc, startProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import type { TestRedis } from '../../testing/redis.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Screenshots of a test run (not committed). */
export const OUTPUT_DIR = join(ROOT, 'test-output', 'ui');
const CHROMIUM = process.env.DEEPQ_CHROMIUM ?? '/usr/bin/chromium';

export interface UiProc {
  svc: ServiceProc;
  url: string;
  port: number;
}

/**
 * `deepq ui` on a fixed port (so a restart keeps its address), ready when /readyz says so;
 * with `alive`, as soon as /healthz answers (it serves while Redis is down; /readyz does not).
 */
export async function startUi(
  env: NodeJS.ProcessEnv,
  opts: { port?: number; args?: string[]; alive?: boolean } = {},
): Promise<UiProc> {
  const port = opts.port ?? (await freePort());
  const svc = startProcess('ui', ['ui', '--port', String(port), ...(opts.args ?? [])], env);
  if (opts.alive) await until(() => answers(`http://127.0.0.1:${svc.port}/healthz`), 'the ui /healthz', 60_000);
  else await waitForStart(svc);
  return { svc, url: `http://127.0.0.1:${port}`, port };
}

async function answers(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.ok,
    () => false,
  );
}

/** What a test file of the inspector works with: its env, a GoalClient on its Redis, `deepq ui`, Chromium. */
export interface Inspector {
  env: NodeJS.ProcessEnv;
  client: GoalClient;
  ui: UiProc;
  browser: Browser;
}

/**
 * The inspector for a test file without services: before its tests, a GoalClient, `deepq ui`
 * and Chromium against the file's private Redis (`extraEnv` on top of testEnv), handed to
 * `assign` (awaited: a file's own setup goes there, as Node 20 runs top-level `before` hooks
 * concurrently); after them, the browser and the client closed (the ui process stops with the file).
 */
export function useInspector(
  redis: TestRedis,
  extraEnv: NodeJS.ProcessEnv,
  assign: (inspector: Inspector) => unknown,
): void {
  let it: Partial<Inspector> = {};
  before(async () => {
    await redis.ready;
    const env = testEnv(redis.url, extraEnv);
    const client = new GoalClient(loadConfig(env), createRedis(redis.url, 'deepq:test'));
    it = { env, client };
    const [ui, browser] = await Promise.all([startUi(env), launchBrowser()]);
    it = { env, client, ui, browser };
    await assign(it as Inspector);
  });
  after(async () => {
    await it.browser?.close();
    await it.client?.close();
  });
}

export function launchBrowser(args: string[] = []): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}

/** Every dialog (dismissed at once), console message and uncaught error a page produces. */
export function recordMisbehaviour(page: Page): string[] {
  const seen: string[] = [];
  page.on('dialog', (d) => {
    seen.push(`dialog ${d.type()}: ${d.message()}`);
    void d.dismiss().catch(() => {});
  });
  page.on('console', (m) => seen.push(`console ${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => seen.push(`pageerror: ${e.message}`));
  return seen;
}

export function outputPath(name: string): string {
  mkdirSync(OUTPUT_DIR, { recursive: true });
  return join(OUTPUT_DIR, name);
}

/** Polls `fn` until it returns something truthy. */
export async function until<T>(fn: () => Promise<T> | T, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A goal's live feed (`/events`) read as text: `waitFor` resolves once what arrived matches,
 * `ended` once the server ends the stream (each fails after 15 s).
 */
export async function openEventStream(uiUrl: string, goalId: string, after = '') {
  const ac = new AbortController();
  const res = await fetch(`${uiUrl}/goals/${goalId}/events?after=${after}`, { signal: ac.signal });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  /** Reads until `done(text, ended)` holds; false when the stream ended or 15 s passed. */
  const readUntil = async (done: (ended: boolean) => boolean) => {
    const timer = setTimeout(() => ac.abort(), 15_000);
    try {
      for (;;) {
        const next = await reader.read().catch(() => ({ done: true, value: undefined, aborted: true }));
        if (next.done) return done(!('aborted' in next));
        text += decoder.decode(next.value, { stream: true });
        if (done(false)) return true;
      }
    } finally {
      clearTimeout(timer);
    }
  };
  const waitFor = async (re: RegExp, what: string) => {
    if (re.test(text) || (await readUntil(() => re.test(text)))) return;
    assert.fail(`${what}: not seen; the stream sent ${JSON.stringify(text.slice(-300))}`);
  };
  const ended = async (what: string) => {
    if (!(await readUntil((end) => end))) assert.fail(`${what}: the stream is still open after 15 s`);
  };
  return { waitFor, ended, text: () => text, close: () => ac.abort() };
}
