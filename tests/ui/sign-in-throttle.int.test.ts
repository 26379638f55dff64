// Guessing DEEPQ_UI_TOKEN is throttled per client address, across replicas: past the allowed
// wrong tokens (sign-in form or Bearer) the address is refused any token, the right one too,
// with 429 and Retry-After, until the window ends; a session signed in before keeps working.
// Guesses sent all at once are held to the same limit.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, test } from 'node:test';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { startUi, type UiProc } from './harness.ts';

const TOKEN = randomBytes(24).toString('hex');
const WINDOW_SECONDS = 3;
const redis = useRedis();
let one: UiProc;
let two: UiProc;

before(async () => {
  await redis.ready;
  const env = testEnv(redis.url, {
    DEEPQ_UI_TOKEN: TOKEN,
    DEEPQ_UI_SIGNIN_MAX_FAILURES: '3',
    DEEPQ_UI_SIGNIN_WINDOW_SECONDS: String(WINDOW_SECONDS),
  });
  [one, two] = await Promise.all([startUi(env), startUi(env)]);
});

/** Posts the sign-in form (with its CSRF cookie and field); the status and the session cookie. */
async function signIn(ui: UiProc, token: string): Promise<{ status: number; session?: string; body: string }> {
  const form = await fetch(`${ui.url}/login`);
  const csrf = /deepq_csrf=([a-f0-9]{64})/.exec(form.headers.get('set-cookie') ?? '')![1]!;
  await form.body?.cancel();
  const res = await fetch(`${ui.url}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: `deepq_csrf=${csrf}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, _csrf: csrf, next: '/' }).toString(),
  });
  const session = /deepq_ui_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
  return { status: res.status, session, body: await res.text() };
}

const bearer = (ui: UiProc, token: string) => fetch(`${ui.url}/`, { headers: { authorization: `Bearer ${token}` } });

test('wrong tokens lock the address out on every replica, the right token included, until the window ends', {
  timeout: 30_000,
}, async () => {
  const signedIn = await signIn(one, TOKEN);
  assert.equal(signedIn.status, 303);
  assert.ok(signedIn.session);

  assert.equal((await signIn(one, 'wrong-token-1')).status, 401);
  assert.equal((await bearer(two, 'wrong-token-2')).status, 401, 'a wrong Bearer on the other replica');
  assert.equal((await signIn(two, 'wrong-token-3')).status, 401);

  const locked = await bearer(one, TOKEN);
  assert.equal(locked.status, 429, 'the right token was accepted during the lockout');
  const wait = Number(locked.headers.get('retry-after'));
  assert.ok(wait >= 1 && wait <= WINDOW_SECONDS, `retry-after ${wait}`);
  const form = await signIn(two, TOKEN);
  assert.equal(form.status, 429);
  assert.equal(form.session, undefined);
  assert.match(form.body, /Too many wrong tokens from this address: try again in \d+ s\./);

  const session = await fetch(`${one.url}/`, { headers: { cookie: `deepq_ui_session=${signedIn.session}` } });
  assert.equal(session.status, 200, 'a session signed in before the lockout stopped working');
  await session.body?.cancel();

  await new Promise((r) => setTimeout(r, (wait + 0.5) * 1000));
  const after = await bearer(two, TOKEN);
  assert.equal(after.status, 200, 'still locked out after the window');
  await after.body?.cancel();
});

test('requests without a token are not guesses: they never lock the address out', async () => {
  for (let i = 0; i < 6; i++) {
    const res = await fetch(`${one.url}/`);
    assert.equal(res.status, 401);
    await res.body?.cancel();
  }
  const ok = await bearer(one, TOKEN);
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
});

test('guesses sent all at once are each counted before they are checked', { timeout: 30_000 }, async () => {
  const guesses = Array.from({ length: 60 }, (_, i) => (i % 2 ? bearer(one, `wrong-${i}`) : signIn(two, `wrong-${i}`)));
  const statuses = (await Promise.all(guesses)).map((r) => r.status);
  const checked = statuses.filter((s) => s === 401).length;
  assert.equal(checked, 3, `${checked} of 60 guesses checked (limit 3): ${statuses.join(' ')}`);
  assert.equal(statuses.filter((s) => s === 429).length, 57);
  // Right tokens count as nothing: many at once after the window are all let in.
  await new Promise((r) => setTimeout(r, (WINDOW_SECONDS + 0.5) * 1000));
  const right = await Promise.all(Array.from({ length: 10 }, () => bearer(one, TOKEN)));
  assert.deepEqual(
    right.map((r) => r.status),
    Array(10).fill(200),
  );
  await Promise.all(right.map((r) => r.body?.cancel()));
  assert.equal((await bearer(two, 'wrong-again')).status, 401, 'the right tokens left no count behind');
});
