// A token reservation must outlive its call, or the goal's other calls may spend its share
// while it still runs: its lifetime covers every attempt at the slowest timeout any provider has.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RATE_LIMIT_RETRIES } from '../../shared/agent/middleware/retry.ts';
import { reservationTtlMs } from '../../shared/goal/budgets.ts';
import { loadConfig } from '../../shared/runtime/config.ts';

test("a reservation lives through every attempt at the slowest provider's timeout", () => {
  const plain = loadConfig({});
  const attempts = plain.modelRetry.maxRetries + 1;
  assert.ok(reservationTtlMs(plain) >= attempts * plain.modelTimeoutMs);
  // The predefined anthropic streams: a call may take its whole-call limit.
  assert.ok(reservationTtlMs(plain) >= attempts * plain.modelMaxCallMs);
  // A local model given 15 minutes a call, far past DEEPQ_MODEL_TIMEOUT_MS, used by both tiers.
  const slow = loadConfig(
    {},
    {
      providers: { local: { type: 'openai', baseURL: 'http://127.0.0.1:1/v1', timeoutMs: 900_000 } },
      models: { HIGH: 'local:big', LOW: 'local:small' },
    },
  );
  assert.ok(slow.modelTimeoutMs < 900_000);
  assert.ok(reservationTtlMs(slow) >= attempts * 900_000, `${reservationTtlMs(slow)} ms`);
});

test('a reservation lives through the in-place retries of a rate limit or a patient caller, not only a fault', () => {
  // The planner and reflector retry a 5xx up to RATE_LIMIT_RETRIES times, each answer as slow as the timeout.
  const cfg = loadConfig({});
  const { maxDelayMs } = cfg.modelRetry;
  const longest = (RATE_LIMIT_RETRIES + 1) * cfg.modelTimeoutMs + RATE_LIMIT_RETRIES * maxDelayMs;
  assert.ok(reservationTtlMs(cfg) >= longest, `${reservationTtlMs(cfg)} ms < ${longest} ms`);
});

test('a streamed provider counts by its whole-call limit, and a provider no model uses not at all', () => {
  const gateway = (extra: Record<string, unknown>) =>
    loadConfig(
      { DEEPQ_MODEL_MAX_CALL_MS: '60000' },
      {
        providers: {
          gw: { type: 'anthropic', baseURL: 'http://127.0.0.1:1', apiKeyEnv: 'GW_KEY', ...extra },
          idle: { type: 'openai', baseURL: 'http://127.0.0.1:1/v1', timeoutMs: 3_000_000 },
        },
        models: { HIGH: 'gw:m', LOW: 'gw:m' },
      },
    );
  const attempts = Math.max(loadConfig({}).modelRetry.maxRetries, RATE_LIMIT_RETRIES) + 1;
  const streamed = reservationTtlMs(gateway({ maxCallMs: 1_500_000 }));
  assert.ok(streamed >= attempts * 1_500_000, `${streamed} ms`);
  assert.ok(streamed < attempts * 3_000_000, 'the unused provider does not count');
  // Sent whole, a call is bounded by its timeout (the default 120 s here), not the whole-call limit.
  const whole = reservationTtlMs(gateway({ stream: false, maxCallMs: 1_500_000 }));
  assert.ok(whole < attempts * 200_000, `${whole} ms`);
});
