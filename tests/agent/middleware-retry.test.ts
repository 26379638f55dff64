// Retry with backoff on 429, 5xx, timeouts, connection errors and malformed bodies,
// honouring retry-after (0 included: the SDK ignores 0, and its own retries are off).
// Through the real AnthropicProvider and SDK against a local Messages-API server.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rateLimitPauseMs } from '../../services/subagent-worker/rate-limited.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import type { MiddlewareDeps } from '../../shared/agent/middleware/index.ts';
import { backoffMs, MAX_QUEUE_PAUSE_MS, RATE_LIMIT_RETRIES } from '../../shared/agent/middleware/retry.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import { ModelCallError } from '../../shared/agent/providers/types.ts';
import { type AgentSpec, RoleSpecSchema } from '../../shared/agent/roles.ts';
import { ProviderRateLimitError } from '../../shared/errors.ts';
import { anthropicAt, captureLogger, ctxFor, type LogLine, useMessagesApi } from '../../testing/agent-harness.ts';
import { apiError, type HandlerResult, type MessagesApiServer, text } from '../../testing/messages-api-server.ts';

let server: MessagesApiServer;
useMessagesApi(null, (s) => (server = s));

const SPEC: AgentSpec = RoleSpecSchema.parse({ name: 'tester', systemPrompt: 'You answer.', tier: 'LOW' });

interface Outcome {
  ok: boolean;
  text?: string;
  err?: unknown;
  requests: number;
  retries: LogLine[];
  receivedAt: number[];
}

/** Serves `faults` in order, then a good answer; runs one agent call. */
async function callThrough(
  faults: HandlerResult[],
  opts: { retry?: MiddlewareDeps['retry']; timeoutMs?: number; spec?: AgentSpec; signal?: AbortSignal } = {},
): Promise<Outcome> {
  let n = 0;
  server.setHandler(() => (n < faults.length ? faults[n++]! : text('fine')));
  const from = server.requests.length;
  const { logger, lines } = captureLogger();
  const agent = createAgent(opts.spec ?? SPEC, {
    provider: anthropicAt(server, opts.timeoutMs ?? 10_000),
    logger,
    models: { HIGH: 'm-high', LOW: 'm-low' },
    retry: { baseDelayMs: 20, maxDelayMs: 200, ...opts.retry },
  });
  const out: Outcome = { ok: false, requests: 0, retries: [], receivedAt: [] };
  try {
    const run = await agent.run({ task: 'hi', contract: textContract, ctx: ctxFor('tester', { signal: opts.signal }) });
    out.ok = run.ok;
    out.text = run.text;
  } catch (err) {
    out.err = err;
  }
  const reqs = server.requests.slice(from);
  out.requests = reqs.length;
  out.receivedAt = reqs.map((r) => r.receivedAt);
  out.retries = lines.filter((l) => l.msg === 'retrying model call');
  return out;
}

test('backoff is exponential with jitter, capped', () => {
  assert.equal(
    backoffMs(0, 100, 10_000, () => 0),
    50,
  );
  assert.equal(
    backoffMs(0, 100, 10_000, () => 1),
    100,
  );
  assert.equal(
    backoffMs(3, 100, 10_000, () => 1),
    800,
  );
  assert.equal(
    backoffMs(3, 100, 10_000, () => 0),
    400,
  );
  assert.equal(
    backoffMs(20, 100, 10_000, () => 1),
    10_000,
  );
});

test('5xx answers are retried with backoff until one succeeds', async () => {
  const o = await callThrough([apiError(500, 'boom'), apiError(503, 'unavailable'), apiError(502, 'bad gateway')]);
  assert.equal(o.ok, true, String(o.err));
  assert.equal(o.text, 'fine');
  assert.equal(o.requests, 4, 'one HTTP request per attempt: the SDK does not retry on its own');
  assert.deepEqual(
    o.retries.map((l) => [l.attempt, l.kind]),
    [
      [1, 'server'],
      [2, 'server'],
      [3, 'server'],
    ],
  );
  o.retries.forEach((l, k) => {
    const exp = Math.min(200, 20 * 2 ** k);
    assert.ok(
      Number(l.waitMs) >= exp / 2 && Number(l.waitMs) <= exp,
      `attempt ${k + 1} waited ${l.waitMs} ms, outside [${exp / 2}, ${exp}]`,
    );
  });
});

test('retries stop after maxRetries and the error surfaces', async () => {
  const o = await callThrough(Array(10).fill(apiError(500, 'down')), { retry: { maxRetries: 2 } });
  assert.equal(o.requests, 3);
  assert.ok(o.err instanceof ModelCallError);
  assert.equal(o.err.kind, 'server');
  assert.equal(o.err.status, 500);
});

test('429 honours retry-after: seconds, 0, retry-after-ms, an HTTP date; capped at the max delay', async () => {
  const cases: [Record<string, string>, number][] = [
    [{ 'retry-after': '1' }, 1000],
    [{ 'retry-after': '0' }, 0],
    [{ 'retry-after-ms': '150', 'retry-after': '9' }, 150],
    [{ 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' }, 0],
    [{ 'retry-after': '3' }, 1500],
  ];
  for (const [headers, wait] of cases) {
    // A base delay far above any of these: only an honoured header explains the wait.
    const o = await callThrough([apiError(429, 'slow down', headers)], {
      retry: { baseDelayMs: 60_000, maxDelayMs: 1500 },
    });
    assert.equal(o.ok, true, `${JSON.stringify(headers)}: ${String(o.err)}`);
    assert.equal(o.requests, 2);
    assert.equal(o.retries.length, 1);
    assert.equal(o.retries[0]!.kind, 'rate_limit');
    assert.equal(o.retries[0]!.waitMs, wait, JSON.stringify(headers));
    if (wait > 0)
      assert.ok(
        o.receivedAt[1]! - o.receivedAt[0]! >= wait - 50,
        `the retry came ${o.receivedAt[1]! - o.receivedAt[0]!} ms after a retry-after of ${wait} ms`,
      );
  }
});

test('timeouts, connection resets and malformed bodies are retried', async () => {
  const faults: HandlerResult[] = [
    'hang',
    'reset',
    { status: 200, body: '{"id": "msg_1", "content": [' },
    { status: 200, body: { type: 'message' } },
  ];
  const o = await callThrough(faults, { timeoutMs: 300, retry: { maxRetries: 4 } });
  assert.equal(o.ok, true, String(o.err));
  assert.equal(o.requests, 5);
  assert.deepEqual(
    o.retries.map((l) => l.kind),
    ['timeout', 'connection', 'malformed', 'malformed'],
  );
  // maxRetries (3 by default) bounds them all together.
  const o2 = await callThrough(['reset', 'reset', 'reset', 'reset', 'reset']);
  assert.equal(o2.requests, 4);
  assert.equal((o2.err as ModelCallError).kind, 'connection');
});

test('client errors are not retried', async () => {
  for (const status of [400, 401, 404]) {
    const o = await callThrough([apiError(status, 'no')]);
    assert.equal(o.requests, 1, `status ${status}`);
    assert.equal((o.err as ModelCallError).kind, 'client');
    assert.equal(o.retries.length, 0);
  }
});

test('SDK retries are disabled: without the middleware a retryable fault is one request', async () => {
  const spec = { ...SPEC, middleware: SPEC.middleware.filter((m) => m !== 'retry') };
  const o = await callThrough([apiError(500, 'boom', { 'x-should-retry': 'true' })], { spec });
  assert.equal(o.requests, 1);
  assert.equal((o.err as ModelCallError).kind, 'server');
  const o2 = await callThrough([apiError(429, 'slow', { 'retry-after': '0' })], { spec });
  assert.equal(o2.requests, 1);
});

test('in a worker, a 429 becomes a queue-wide rate limit with retry-after (0 included), at most 5 min', async () => {
  for (const [headers, wait] of [
    [{ 'retry-after': '0' }, 0],
    [{ 'retry-after': '2' }, 2000],
    // A day (or a server clock far ahead) would stop the role fleet-wide that long.
    [{ 'retry-after': '86400' }, MAX_QUEUE_PAUSE_MS],
  ] as const) {
    const o = await callThrough([apiError(429, 'slow', headers)], { retry: { rateLimitToQueue: true } });
    assert.equal(o.requests, 1, 'not retried in place: the queue pauses instead');
    assert.ok(o.err instanceof ProviderRateLimitError, String(o.err));
    assert.equal(o.err.retryAfterMs, wait);
  }
  const o = await callThrough([apiError(429, 'slow')], { retry: { rateLimitToQueue: true } });
  assert.ok(o.err instanceof ProviderRateLimitError, String(o.err));
  assert.equal(o.err.retryAfterMs, undefined, "without a header, the queue's backoff decides");
  // It grows with the job's put-backs in a row: 1-2 s, then doubling, to a minute.
  const pause = (requeues: number) => rateLimitPauseMs(o.err as ProviderRateLimitError, requeues);
  assert.ok(pause(1) >= 1000 && pause(1) <= 2000, String(pause(1)));
  assert.ok(pause(4) >= 8000 && pause(4) <= 16_000, String(pause(4)));
  assert.ok(pause(40) >= 30_000 && pause(40) <= 60_000, String(pause(40)));
  assert.equal(rateLimitPauseMs(new ProviderRateLimitError('429', 2000), 40), 2000, 'retry-after wins');
  // Other faults are still retried in place.
  const o2 = await callThrough([apiError(500, 'x')], { retry: { rateLimitToQueue: true } });
  assert.equal(o2.ok, true);
});

test('a 529 (overloaded) is a rate limit: the queue pauses in a worker; in place it outlasts maxRetries', async () => {
  const overloaded = apiError(529, 'Overloaded');
  const queued = await callThrough([overloaded], { retry: { rateLimitToQueue: true } });
  assert.equal(queued.requests, 1, 'not retried in place: the queue pauses instead');
  assert.ok(queued.err instanceof ProviderRateLimitError, String(queued.err));
  // The planner and the reflector wait it out: more retries than a fault gets, then the error.
  const patient = await callThrough(Array(RATE_LIMIT_RETRIES).fill(overloaded), { retry: { maxRetries: 3 } });
  assert.equal(patient.ok, true, String(patient.err));
  assert.equal(patient.requests, RATE_LIMIT_RETRIES + 1);
  assert.ok(patient.retries.every((l) => l.kind === 'rate_limit'));
  const gaveUp = await callThrough(Array(RATE_LIMIT_RETRIES + 1).fill(overloaded), { retry: { maxRetries: 3 } });
  assert.equal(gaveUp.requests, RATE_LIMIT_RETRIES + 1);
  assert.equal((gaveUp.err as ModelCallError).kind, 'rate_limit');
  // A fault that is not a rate limit still stops at maxRetries.
  assert.equal((await callThrough(Array(10).fill(apiError(500, 'x')), { retry: { maxRetries: 3 } })).requests, 4);
});

test('a patient caller (planner, reflector) waits out a 5xx outage as long as a rate limit', async () => {
  const outage = [apiError(500, 'down'), apiError(503, 'unavailable'), apiError(502, 'bad gateway')];
  const faults = Array.from({ length: RATE_LIMIT_RETRIES }, (_, i) => outage[i % 3]!);
  const patient = await callThrough(faults, { retry: { maxRetries: 3, patient: true } });
  assert.equal(patient.ok, true, String(patient.err));
  assert.equal(patient.requests, RATE_LIMIT_RETRIES + 1);
  assert.ok(patient.retries.every((l) => l.kind === 'server'));
  const gaveUp = await callThrough([...faults, apiError(500, 'still down')], {
    retry: { maxRetries: 3, patient: true },
  });
  assert.equal(gaveUp.requests, RATE_LIMIT_RETRIES + 1);
  assert.equal((gaveUp.err as ModelCallError).kind, 'server');
  // A bad request is refused at once however patient the caller.
  const bad = await callThrough([apiError(400, 'prompt too long')], { retry: { maxRetries: 3, patient: true } });
  assert.equal(bad.requests, 1);
});

test('an abort during the backoff stops retrying', async () => {
  const ac = new AbortController();
  const pending = callThrough([apiError(500, 'x')], {
    retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 },
    signal: ac.signal,
  });
  await server.waitForRequests(server.requests.length + 1);
  setTimeout(() => ac.abort(), 20);
  const o = await pending;
  assert.equal(o.requests, 1);
  assert.equal((o.err as ModelCallError).kind, 'aborted');
});
