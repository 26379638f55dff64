// Token accounting: input, output, cache-read and cache-write tokens of every response are
// recorded per goal, role and model, kept on the goal, exported as metrics and shown by
// `deepq status`. Usage comes from the Messages API responses (real SDK, local server).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BudgetRefused, createAgent } from '../../shared/agent/create-agent.ts';
import { tokenAccounting } from '../../shared/agent/middleware/tokens.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import type { CallContext } from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import { TOKEN_KINDS, type Usage } from '../../shared/goal/store.ts';
import {
  anthropicAt,
  anthropicEnv,
  captureLogger,
  ctxFor,
  TEST_MODELS,
  useMessagesApi,
} from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { apiError, type MessagesApiServer, roleOf, text, type WireUsage } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
useMessagesApi(redis, (s) => (server = s));

test('each response’s four token kinds go to the sink once, with the role and the model that answered', async () => {
  const calls: { ctx: CallContext; model: string; usage: Usage }[] = [];
  let n = 0;
  server.setHandler(() =>
    n++ === 0
      ? apiError(500, 'retry me')
      : text('ok', {
          model: 'model-that-answered',
          usage: { input_tokens: 5, output_tokens: 7, cache_read_input_tokens: 11, cache_creation_input_tokens: 13 },
        }),
  );
  const spec = RoleSpecSchema.parse({ name: 'counter', systemPrompt: 'Count.', tier: 'LOW' });
  const agent = createAgent(spec, {
    provider: anthropicAt(server),
    logger: captureLogger().logger,
    models: TEST_MODELS,
    retry: { baseDelayMs: 1 },
    usageSink: async (ctx, model, usage) => void calls.push({ ctx, model, usage }),
  });
  await agent.run({ task: 't', contract: textContract, ctx: ctxFor('counter') });
  assert.equal(calls.length, 1, 'a failed attempt has no usage; the retried call counts once');
  assert.equal(calls[0]!.model, 'model-that-answered');
  assert.equal(calls[0]!.ctx.role, 'counter');
  assert.equal(calls[0]!.ctx.goalId, 'goaltest01');
  assert.deepEqual(calls[0]!.usage, { input: 5, output: 7, cache_read: 11, cache_write: 13 });
});

test('missing or null usage fields count as zero', async () => {
  const got: Usage[] = [];
  const mw = tokenAccounting({ usageSink: async (_c, _m, u) => void got.push(u) });
  const ctx: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
  const req = { model: 'req-model', system: 's', messages: [], max_tokens: 1 };
  await mw(req, ctx, async () => ({
    model: '',
    content: [],
    stop_reason: 'end_turn',
    usage: { input_tokens: 3, output_tokens: 4, cache_read_input_tokens: null, cache_creation_input_tokens: null },
  }));
  assert.deepEqual(got, [{ input: 3, output: 4, cache_read: 0, cache_write: 0 }]);
});

const ROLE_NAME = {
  planner: 'planner',
  reflector: 'reflector',
  research: 'research-specialist',
  code: 'code-writer',
  critic: 'critic',
} as const;

test('a goal’s usage per role and model is kept on the goal, exported, and shown by `deepq status`', async (t) => {
  server.setHandler((await import('../../testing/messages-api-server.ts')).defaultHandler);
  const fleet: Fleet = await startFleet(redis.url, anthropicEnv(server));
  t.after(() => fleet.stop());
  const from = server.requests.length;
  const goalId = await fleet.client.enqueue({ goal: 'Write a sorting function' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done');

  // What the API reported, response by response.
  const expected: Record<string, Usage> = {};
  const total: Usage = { input: 0, output: 0, cache_read: 0, cache_write: 0 };
  for (const r of server.requests.slice(from)) {
    const res = r.response!.body as { model: string; usage: WireUsage };
    const key = `${ROLE_NAME[roleOf(r.body) as keyof typeof ROLE_NAME]}|${res.model}`;
    expected[key] ??= { input: 0, output: 0, cache_read: 0, cache_write: 0 };
    const u = expected[key];
    const add: Usage = {
      input: res.usage.input_tokens,
      output: res.usage.output_tokens,
      cache_read: res.usage.cache_read_input_tokens,
      cache_write: res.usage.cache_creation_input_tokens,
    };
    for (const k of TOKEN_KINDS) {
      u[k] += add[k];
      total[k] += add[k];
    }
  }
  assert.deepEqual(Object.keys(expected).sort(), [
    `code-writer|${TEST_MODELS.HIGH}`,
    `critic|${TEST_MODELS.LOW}`,
    `planner|${TEST_MODELS.HIGH}`,
    `reflector|${TEST_MODELS.LOW}`,
    `research-specialist|${TEST_MODELS.LOW}`,
  ]);
  for (const k of TOKEN_KINDS) assert.ok(total[k] > 0, `the run produced ${k} tokens`);

  // Kept on the goal.
  assert.deepEqual(g.usage, expected);
  assert.deepEqual(g.tokens, total);

  // Exported per role, model and kind (never per goal) by the service that made the call.
  const metrics = await (await fetch(`http://127.0.0.1:${fleet.ports.get('planner')}/metrics`)).text();
  const planner = expected[`planner|${TEST_MODELS.HIGH}`]!;
  for (const k of TOKEN_KINDS) {
    const line = metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith('deepq_llm_tokens_total{') &&
          l.includes('role="planner"') &&
          l.includes(`kind="${k}"`) &&
          l.includes(`model="${TEST_MODELS.HIGH}"`),
      );
    assert.ok(line, `deepq_llm_tokens_total for planner/${k}`);
    assert.equal(Number(line.split(' ').pop()), planner[k]);
    assert.ok(!line.includes(goalId));
  }

  // Shown by `deepq status`.
  const out = await runCli(['status', goalId], fleet.env);
  assert.equal(out.code, 0, out.stderr);
  const sum = total.input + total.output + total.cache_read + total.cache_write;
  assert.match(
    out.stdout,
    new RegExp(
      `^tokens\\s+${sum} \\(input ${total.input}, output ${total.output}, ` +
        `cache read ${total.cache_read}, cache write ${total.cache_write}\\)$`,
      'm',
    ),
  );
  for (const [key, u] of Object.entries(expected)) {
    const [role, model] = key.split('|');
    assert.match(
      out.stdout,
      new RegExp(
        `^  ${role} @ ${model}\\s+in ${u.input} out ${u.output} cache r/w ${u.cache_read}/${u.cache_write}$`,
        'm',
      ),
      `status line for ${key}`,
    );
  }
});

test("an answer cut at the budget's grant (fewer tokens than asked) is the budget running out", async () => {
  // The model writes until it runs out of output tokens, whatever it was allowed.
  server.setHandler((body) => text('a long answer, cut '.repeat(10), { stop_reason: 'max_tokens', model: body.model }));
  const spec = RoleSpecSchema.parse({ name: 'writer', systemPrompt: 'Write.', tier: 'LOW', maxTokens: 1024 });
  const run = (granted: number) =>
    createAgent(spec, {
      provider: anthropicAt(server),
      logger: captureLogger().logger,
      models: TEST_MODELS,
      // The goal's budget: what token accounting reserves before the call.
      budget: { reserve: async () => ({ maxTokens: granted, member: '' }), release: async () => {} },
    }).run({ task: 't', contract: textContract, ctx: ctxFor('writer') });
  const refused = await run(300).then(
    () => null,
    (err: unknown) => err,
  );
  assert.ok(refused instanceof BudgetRefused, `not refused: ${refused}`);
  assert.equal(refused.hit.kind, 'tokens');
  assert.match(refused.message, /the answer was cut at the 300 output tokens left/);
  assert.equal(refused.checkpoint.turns, 0, 'the cut turn is asked again after a resume');
  // Cut at the agent's own limit (the budget granted all it asked): not the budget, but no answer
  // either (handoff-contracts: retried once, then failed naming the role's maxTokens).
  const own = await run(1024);
  assert.equal(own.ok, false);
  assert.match(own.problem!, /cut off at the role's maxTokens \(1024 output tokens\), on the retry too/);
});

test('a stream cut or stalled after it began is booked (its input, its output so far), then the answer', async () => {
  const calls: { usage: Usage; estimated: boolean }[] = [];
  const start = { input_tokens: 5000, output_tokens: 1, cache_read_input_tokens: 300, cache_creation_input_tokens: 0 };
  let n = 0;
  server.setHandler(() => {
    const usage = { ...start, output_tokens: 40 };
    const long = text('lorem ipsum '.repeat(50), { usage });
    // The first attempt is cut after some deltas, the second stalls; the third answers.
    const attempt = n++;
    if (attempt === 0) return { ...long, stream: { chunk: 12, endAfter: 6 } };
    if (attempt === 1) return { ...long, stream: { chunk: 12, stallAfter: 6 } };
    return text('ok', { usage: { input_tokens: 5, output_tokens: 7 } });
  });
  const spec = RoleSpecSchema.parse({ name: 'counter', systemPrompt: 'Count.', tier: 'LOW' });
  const agent = createAgent(spec, {
    provider: anthropicAt(server, 300),
    logger: captureLogger().logger,
    models: TEST_MODELS,
    retry: { baseDelayMs: 1 },
    usageSink: async (_ctx, _model, usage, _member, origin) =>
      void calls.push({ usage, estimated: origin?.estimated === true }),
  });
  const run = await agent.run({ task: 't', contract: textContract, ctx: ctxFor('counter') });
  assert.equal(run.ok, true);
  assert.equal(calls.length, 2, 'the failed attempts together, then the answer');
  const [failed, answer] = calls;
  assert.equal(failed!.estimated, true);
  assert.equal(failed!.usage.input, 2 * 5000, 'each failed attempt billed its input');
  assert.equal(failed!.usage.cache_read, 2 * 300);
  // What streamed before each failure, about 4 characters a token: some, not the whole answer's 40.
  assert.ok(failed!.usage.output > 0 && failed!.usage.output < 2 * 40, `output so far: ${failed!.usage.output}`);
  assert.deepEqual([answer!.usage.input, answer!.usage.output, answer!.estimated], [5, 7, false]);
});
