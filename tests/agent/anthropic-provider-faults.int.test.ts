// The anthropic provider, only ever through the real @anthropic-ai/sdk against a local
// Messages-API server: text and tool_use round trips, usage, and the fault matrix (429 with
// retry-after, 5xx, connection reset, timeout, malformed body, contract-breaking output).
// Each fault maps to what the retry policy needs; end to end, through real service
// processes, each is handled by its policy: never a crash loop, never a stuck goal.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { codeContract } from '../../shared/agent/output-contracts.ts';
import { AnthropicProvider } from '../../shared/agent/providers/anthropic.ts';
import { type CallContext, ModelCallError, type ModelRequest } from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import { anthropicAt, anthropicEnv, captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  apiError,
  type DeepqRole,
  defaultHandler,
  FAKE_API_KEY,
  firstUserText,
  type HandlerResult,
  type MessagesApiServer,
  roleOf,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
useMessagesApi(redis, (s) => (server = s));

const CTX: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
const REQ: ModelRequest = {
  model: 'model-x',
  system: [{ type: 'text', text: 'You are a test.', cache_control: { type: 'ephemeral' } }],
  messages: [{ role: 'user', content: 'hello' }],
  tools: [{ name: 'list_files', description: 'List.', input_schema: { type: 'object', properties: {} } }],
  max_tokens: 321,
};

async function once(result: HandlerResult, timeoutMs = 5000, opts: { stream?: boolean; maxCallMs?: number } = {}) {
  server.setHandler(() => result);
  const from = server.requests.length;
  try {
    const res = await anthropicAt(server, timeoutMs, opts).createMessage(REQ, CTX);
    return { res, err: undefined, reqs: server.requests.slice(from) };
  } catch (err) {
    return { res: undefined, err: err as ModelCallError, reqs: server.requests.slice(from) };
  }
}

test('a text answer: the request goes out as given, the answer and its usage come back', async () => {
  const { res, reqs } = await once(
    text('Hi there', {
      usage: { input_tokens: 12, output_tokens: 3, cache_read_input_tokens: 40, cache_creation_input_tokens: 9 },
    }),
  );
  assert.equal(reqs.length, 1);
  const r = reqs[0]!;
  assert.equal(r.method, 'POST');
  assert.equal(r.path, '/v1/messages');
  assert.equal(r.apiKey, FAKE_API_KEY);
  assert.ok(r.headers['anthropic-version']);
  assert.deepEqual(Object.keys(r.body).sort(), ['max_tokens', 'messages', 'model', 'stream', 'system', 'tools']);
  assert.equal(r.body.stream, true, 'answers are streamed');
  assert.deepEqual(
    {
      model: r.body.model,
      system: r.body.system,
      messages: r.body.messages,
      tools: r.body.tools,
      max_tokens: r.body.max_tokens,
    },
    REQ,
  );
  assert.equal(res!.model, 'model-x');
  assert.equal(res!.stop_reason, 'end_turn');
  assert.deepEqual(res!.content, [{ type: 'text', text: 'Hi there' }]);
  assert.deepEqual(res!.usage, {
    input_tokens: 12,
    output_tokens: 3,
    cache_read_input_tokens: 40,
    cache_creation_input_tokens: 9,
  });
});

test('a gateway that reports no usage: estimated, flagged, said once', async () => {
  const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'model-x', stop_reason: 'end_turn' };
  server.setHandler(() => ({ status: 200, body: { ...message, content: [{ type: 'text', text: 'x'.repeat(400) }] } }));
  const warned: string[] = [];
  const p = new AnthropicProvider({
    apiKey: FAKE_API_KEY,
    baseURL: server.url,
    timeoutMs: 10_000,
    stream: false,
    onEstimatedUsage: (provider, model) => warned.push(`${provider} ${model}`),
  });
  const first = await p.createMessage(REQ, CTX);
  await p.createMessage(REQ, CTX);
  assert.equal(first.usage.estimated, true);
  assert.ok(first.usage.output_tokens >= 100, `output estimated at ${first.usage.output_tokens} tokens`);
  assert.ok(first.usage.input_tokens > 0);
  assert.deepEqual(warned, ['anthropic model-x']);
  server.setHandler(defaultHandler);
});

test('usage that is no count (negative, Infinity, a string) is estimated or zero, never booked as is', async () => {
  const message = { id: 'msg_2', type: 'message', role: 'assistant', model: 'model-y', stop_reason: 'end_turn' };
  const content = [{ type: 'text', text: 'y'.repeat(400) }];
  let usage: Record<string, unknown> = {};
  server.setHandler(() => ({ status: 200, body: { ...message, content, usage } }));
  const p = new AnthropicProvider({ apiKey: FAKE_API_KEY, baseURL: server.url, timeoutMs: 10_000, stream: false });
  usage = { input_tokens: 10, output_tokens: -5000 };
  const negative = (await p.createMessage(REQ, CTX)).usage;
  assert.equal(negative.estimated, true);
  assert.ok(negative.output_tokens >= 100, JSON.stringify(negative));
  // A JSON number too large for a double reads as Infinity; cache counts as strings are no counts.
  usage = { input_tokens: 12, output_tokens: 3.6, cache_read_input_tokens: '7', cache_creation_input_tokens: -1 };
  assert.deepEqual((await p.createMessage(REQ, CTX)).usage, {
    input_tokens: 12,
    output_tokens: 4,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  });
  server.setHandler(() => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...message, content }).replace(/}$/, ',"usage":{"input_tokens":1e999,"output_tokens":2}}'),
  }));
  assert.equal((await p.createMessage(REQ, CTX)).usage.estimated, true);
  server.setHandler(defaultHandler);
});

test('a tool_use answer round-trips: id, name and input reach the agent, the result goes back', async () => {
  const { res } = await once(toolUse('list_files', { deep: { x: [1, 2] } }, { id: 'toolu_rt_1' }));
  assert.equal(res!.stop_reason, 'tool_use');
  assert.deepEqual(res!.content, [
    { type: 'tool_use', id: 'toolu_rt_1', name: 'list_files', input: { deep: { x: [1, 2] } } },
  ]);
  // Through the agent loop: the tool_result answers that id in the next request.
  let n = 0;
  server.setHandler(() => (n++ === 0 ? toolUse('list_files', {}, { id: 'toolu_rt_2' }) : text('```\nok\n```')));
  const spec = RoleSpecSchema.parse({ name: 'rt', systemPrompt: 'You code.', tools: [] });
  const agent = createAgent(spec, {
    provider: anthropicAt(server),
    logger: captureLogger().logger,
    models: { HIGH: 'h', LOW: 'l' },
  });
  const from = server.requests.length;
  const run = await agent.run({
    task: 't',
    tools: [{ def: REQ.tools![0]!, run: async () => 'file list' }],
    contract: codeContract,
    ctx: ctxFor('rt'),
  });
  assert.equal(run.ok, true);
  const second = server.requests[from + 1]!.body.messages[2]!;
  assert.deepEqual(second, {
    role: 'user',
    // The latest turn carries the prompt-cache breakpoint (the middleware is on by default).
    content: [
      { type: 'tool_result', tool_use_id: 'toolu_rt_2', content: 'file list', cache_control: { type: 'ephemeral' } },
    ],
  });
});

test('the fault matrix maps each fault to what the retry policy needs', { timeout: 30_000 }, async () => {
  const cases: {
    name: string;
    result: HandlerResult;
    kind: ModelCallError['kind'];
    status?: number;
    retryAfterMs?: number;
    retryable: boolean;
  }[] = [
    {
      name: '429 + retry-after',
      result: apiError(429, 'rate limited', { 'retry-after': '2' }),
      kind: 'rate_limit',
      status: 429,
      retryAfterMs: 2000,
      retryable: true,
    },
    {
      name: '429 + retry-after: 0',
      result: apiError(429, 'rate limited', { 'retry-after': '0' }),
      kind: 'rate_limit',
      status: 429,
      retryAfterMs: 0,
      retryable: true,
    },
    {
      name: '429 without header',
      result: apiError(429, 'rate limited'),
      kind: 'rate_limit',
      status: 429,
      retryAfterMs: undefined,
      retryable: true,
    },
    { name: '500', result: apiError(500, 'internal'), kind: 'server', status: 500, retryable: true },
    {
      name: '503 + retry-after',
      result: apiError(503, 'unavailable', { 'retry-after': '1' }),
      kind: 'server',
      status: 503,
      retryAfterMs: 1000,
      retryable: true,
    },
    // Overloaded: the provider asks every client to back off, as with a 429.
    { name: '529 overloaded', result: apiError(529, 'overloaded'), kind: 'rate_limit', status: 529, retryable: true },
    { name: '408', result: apiError(408, 'request timeout'), kind: 'server', status: 408, retryable: true },
    { name: 'connection reset', result: 'reset', kind: 'connection', retryable: true },
    { name: 'timeout', result: 'hang', kind: 'timeout', retryable: true },
    { name: 'body stalls after the headers', result: 'stall', kind: 'timeout', retryable: true },
    {
      name: 'malformed JSON body',
      result: { status: 200, body: '{"id": "msg_1", "type": "mess' },
      kind: 'malformed',
      retryable: true,
    },
    {
      name: 'JSON without content',
      result: { status: 200, body: { id: 'msg_1', type: 'message' } },
      kind: 'malformed',
      retryable: true,
    },
    {
      name: 'not JSON at all',
      result: { status: 200, headers: { 'content-type': 'text/html' }, body: '<html>gateway</html>' },
      kind: 'malformed',
      retryable: true,
    },
    // What a non-conforming gateway may send: a block that is not one, a tool_use without a name.
    ...[null, 'text', { type: 'tool_use', id: 't1', input: {} }].map((block) => ({
      name: `content block ${JSON.stringify(block)}`,
      result: { status: 200, body: { id: 'msg_1', type: 'message', role: 'assistant', content: [block] } },
      kind: 'malformed' as const,
      retryable: true,
    })),
    { name: '400', result: apiError(400, 'bad request'), kind: 'client', status: 400, retryable: false },
    { name: '401', result: apiError(401, 'invalid x-api-key'), kind: 'client', status: 401, retryable: false },
  ];
  for (const [c, stream] of cases.flatMap((c) => [[c, true] as const, [c, false] as const])) {
    const { err, reqs } = await once(c.result, 300, { stream });
    assert.ok(err instanceof ModelCallError, `${c.name} (stream ${stream}): ${String(err)}`);
    assert.equal(err.kind, c.kind, c.name);
    assert.equal(err.retryable, c.retryable, c.name);
    if ('status' in c) assert.equal(err.status, c.status, c.name);
    if ('retryAfterMs' in c) assert.equal(err.retryAfterMs, c.retryAfterMs, c.name);
    assert.equal(reqs.length, 1, `${c.name}: the SDK made exactly one request (its retries are off)`);
    assert.ok(!err.message.includes(FAKE_API_KEY), `${c.name}: the key is not in the error`);
  }
});

test('a tool_use without an id gets one: its tool_result can name it', async () => {
  server.setHandler(() => ({
    status: 200,
    body: { id: 'msg_1', type: 'message', role: 'assistant', content: [{ type: 'tool_use', name: 'grep', input: {} }] },
  }));
  const res = await anthropicAt(server, 5000, { stream: false }).createMessage(REQ, CTX);
  const [block] = res.content;
  assert.ok(block?.type === 'tool_use' && /^toolu_[0-9a-f]{32}$/.test(block.id), JSON.stringify(block));
});

test('an abort reaches the HTTP call', async () => {
  const ac = new AbortController();
  server.setHandler(() => 'hang');
  const from = server.requests.length;
  const p = anthropicAt(server, 60_000).createMessage(REQ, { ...CTX, signal: ac.signal });
  await server.waitForRequests(from + 1);
  ac.abort();
  await assert.rejects(p, (e: unknown) => e instanceof ModelCallError && e.kind === 'aborted');
});

// ---- end to end: each fault handled by its policy, through real processes ---------------

/** Per goal marker and role: the faults its n-th request gets (then the default model). */
const PLAYBOOK: Record<string, Partial<Record<DeepqRole, (HandlerResult | 'contract')[]>>> = {
  // One of each transient fault, each on a different agent, plus one contract break.
  MARKTRANSIENT: {
    planner: [apiError(429, 'slow down', { 'retry-after': '0' })],
    research: [
      apiError(429, 'slow down', { 'retry-after': '0' }),
      apiError(529, 'Overloaded'),
      apiError(500, 'internal'),
    ],
    code: ['reset', 'contract'],
    critic: [{ status: 200, body: '{"id": "msg_x", "content": [' }, 'stall'],
    reflector: ['hang'],
  },
  // A subagent whose every call fails: bounded retries, then the subtask fails and the
  // reflector (told to stop) sees why.
  MARKDEADSUB: { code: Array(50).fill(apiError(500, 'internal, for good')) },
  // A request the provider refuses as bad: asked once, not once per job attempt.
  MARKREFUSED: { code: Array(50).fill(apiError(400, 'prompt is too long')) },
  // A reflector whose every answer is malformed: the goal fails with the reason.
  MARKDEADREFL: { reflector: Array(50).fill({ status: 200, body: '{"broken": ' }) },
};

test('through the services: every fault is handled by its policy, goals end, no process crash-loops', async (t) => {
  const counts = new Map<string, number>();
  server.setHandler((body, i, rec) => {
    const marker = Object.keys(PLAYBOOK).find((m) => firstUserText(body).includes(m));
    const role = roleOf(body);
    if (marker) {
      const key = `${marker}|${role}`;
      const n = counts.get(key) ?? 0;
      counts.set(key, n + 1);
      const fault = PLAYBOOK[marker]![role]?.[n];
      if (fault === 'contract') return text("I'll decompose this into subtasks first.");
      if (fault) return fault;
      if ((marker === 'MARKDEADSUB' || marker === 'MARKREFUSED') && role === 'reflector')
        return text(JSON.stringify({ decision: 'end', reason: 'the code-writer is down; stopping' }));
    }
    return defaultHandler(body, i, rec);
  });
  const fleet: Fleet = await startFleet(
    redis.url,
    anthropicEnv(server, { DEEPQ_MODEL_TIMEOUT_MS: '1500', DEEPQ_SUBTASK_ATTEMPTS: '2' }),
  );
  t.after(() => fleet.stop());
  const c = fleet.client;
  const ids = await Promise.all(Object.keys(PLAYBOOK).map((m) => c.enqueue({ goal: `Write a sorting function ${m}` })));
  const [transient, deadSub, refused, deadRefl] = await Promise.all(
    ids.map((id) => c.waitFor(id, { timeoutMs: 90_000 })),
  );
  const reqsOf = (marker: string, role: DeepqRole) =>
    server.requests.filter((r) => r.rawBody.includes(marker) && roleOf(r.body) === role);

  // Transient faults: retried (or the queue paused, for a worker's 429), the contract
  // break reminded, and the goal is done as if nothing happened.
  assert.equal(transient!.status, 'done', transient!.reason ?? '');
  const seen = (role: DeepqRole) =>
    reqsOf('MARKTRANSIENT', role).map((r) =>
      r.response!.kind === 'message'
        ? 'ok'
        : r.response!.kind === 'raw'
          ? String(r.response!.status)
          : r.response!.kind,
    );
  assert.deepEqual(
    seen('planner'),
    ['429', 'ok', 'ok'],
    'retried in place (the planner has no queue-wide pause), then cycle 2',
  );
  assert.deepEqual(
    seen('research'),
    ['429', '529', '500', 'ok', 'ok'],
    'the 429 and the 529 paused the queue and the job ran again; the 500 was retried in place',
  );
  assert.deepEqual(seen('code'), ['reset', 'ok', 'ok'], 'the reset was retried, the contract break reminded');
  assert.deepEqual(seen('critic'), ['200', 'stall', 'ok', 'ok'], 'the malformed body and the stalled one were retried');
  assert.deepEqual(seen('reflector'), ['hang', 'ok', 'ok'], 'the timed-out call was retried');
  assert.equal(transient!.step, 2);
  assert.deepEqual((await c.artifacts(transient!.goalId)).map((f) => [f.name, f.status]).sort(), [
    ['critique.json', 'done'],
    ['research.md', 'done'],
    ['solution.py', 'done'],
  ]);
  const codeReqs = reqsOf('MARKTRANSIENT', 'code');
  assert.match(
    JSON.stringify(codeReqs[codeReqs.length - 1]!.body.messages),
    /Your answer was rejected: expected exactly one fenced code block/,
  );
  const events = (await c.goals.events(transient!.goalId)).map((e) => e.event);
  assert.ok(!events.some((e) => e.type === 'subtask_failed'), 'no subtask failed for a transient fault');

  // A subagent that always gets 500: 2 job attempts x (1 + 3 retries), then failed with the
  // reason, which the reflector saw; the goal still ended.
  assert.equal(deadSub!.status, 'done');
  assert.equal(reqsOf('MARKDEADSUB', 'code').length, 8, 'bounded: attempts x (1 + maxRetries)');
  const refl = reqsOf('MARKDEADSUB', 'reflector');
  assert.equal(refl.length, 1);
  assert.match(firstUserText(refl[0]!.body), /^- solution\.py \(code-writer\): failed: .*500/m);
  assert.match(firstUserText(refl[0]!.body), /^- research\.md \(research-specialist\): done$/m);

  // A 400: one request, no retry in place nor another job attempt; the subtask failed with it.
  assert.equal(refused!.status, 'done');
  assert.equal(reqsOf('MARKREFUSED', 'code').length, 1, 'a refused request is not sent again');
  const refusedRefl = reqsOf('MARKREFUSED', 'reflector');
  assert.match(
    firstUserText(refusedRefl[0]!.body),
    /^- solution\.py \(code-writer\): failed: .*400 .*prompt is too long/m,
  );

  // A reflector that always answers garbage: bounded, then the goal fails with the reason.
  assert.equal(deadRefl!.status, 'failed');
  assert.match(deadRefl!.reason!, /^reflection failed: .*malformed/);
  assert.equal(reqsOf('MARKDEADREFL', 'reflector').length, 8);

  // No service died or restarted along the way.
  for (const p of fleet.procs) {
    assert.equal(p.proc.exitCode, null, `${p.name} exited:\n${p.output().slice(-2000)}`);
    assert.doesNotMatch(p.output(), /Unhandled|uncaughtException|FATAL/i, p.name);
    assert.ok(!p.output().includes(FAKE_API_KEY), `${p.name} logged the API key`);
  }
});
