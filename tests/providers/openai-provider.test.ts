// The openai provider, only ever through the real `openai` SDK against a local Chat
// Completions server: deepq's messages and tools on the wire, tool calls round-tripping
// through the agent loop, stop reasons and usage back, servers without usage or tool calling,
// and the fault matrix mapped to the same ModelCallError kinds as the Anthropic provider's.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { tokenAccounting } from '../../shared/agent/middleware/tokens.ts';
import { codeContract, textContract } from '../../shared/agent/output-contracts.ts';
import { createProvider } from '../../shared/agent/providers/index.ts';
import { OpenAIProvider } from '../../shared/agent/providers/openai.ts';
import {
  type CallContext,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
} from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import type { UsageOrigin } from '../../shared/goal/store.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { captureLogger, ctxFor } from '../../testing/agent-harness.ts';
import {
  type ChatCompletionsServer,
  type ChatHandlerResult,
  callTool,
  chatError,
  FAKE_OPENAI_KEY,
  say,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';
import { writeConfig } from './harness.ts';

let server: ChatCompletionsServer;
before(async () => {
  server = await startChatCompletionsServer();
});
after(async () => {
  await server?.close();
});

const CTX: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
const LIST_FILES = { name: 'list_files', description: 'List.', input_schema: { type: 'object', properties: {} } };
const MARK = { type: 'ephemeral' } as const;
/** As the prompt-cache middleware leaves a request: marks the Chat Completions API must never see. */
const REQ: ModelRequest = {
  model: 'qwen3:8b',
  system: [{ type: 'text', text: 'You are a test.', cache_control: MARK }],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hello', cache_control: MARK }] }],
  tools: [{ ...LIST_FILES, cache_control: MARK }],
  max_tokens: 321,
};

interface ProviderOpts {
  timeoutMs?: number;
  headers?: Record<string, string>;
  s?: ChatCompletionsServer;
  stream?: boolean;
  maxCallMs?: number;
}

function provider(opts: ProviderOpts = {}) {
  const s = opts.s ?? server;
  const warned: string[] = [];
  const p = new OpenAIProvider({
    name: 'local',
    baseURL: s.baseURL,
    apiKey: FAKE_OPENAI_KEY,
    timeoutMs: opts.timeoutMs ?? 5000,
    headers: opts.headers,
    stream: opts.stream,
    maxCallMs: opts.maxCallMs,
    onEstimatedUsage: (name, model) => void warned.push(`${name}/${model}`),
  });
  return Object.assign(p, { warned });
}

async function once(result: ChatHandlerResult, timeoutMs = 5000, req: ModelRequest = REQ, stream?: boolean) {
  server.setHandler(() => result);
  const from = server.requests.length;
  try {
    const res = await provider({ timeoutMs, stream }).createMessage(req, CTX);
    return { res, err: undefined, reqs: server.requests.slice(from) };
  } catch (err) {
    return { res: undefined, err: err as ModelCallError, reqs: server.requests.slice(from) };
  }
}

test('a text answer: system, messages and tools go out as Chat Completions; text and usage come back', async () => {
  server.setHandler(() => say('Hi there', { usage: { prompt_tokens: 100, completion_tokens: 7, cached_tokens: 40 } }));
  const from = server.requests.length;
  const res = await provider({ headers: { 'X-Team': 'blue' } }).createMessage(REQ, CTX);
  const [r] = server.requests.slice(from);
  assert.equal(r!.response?.kind, 'completion', JSON.stringify(r!.response));
  assert.equal(r!.path, '/v1/chat/completions');
  assert.equal(r!.apiKey, FAKE_OPENAI_KEY);
  assert.equal(r!.headers['x-team'], 'blue');
  assert.deepEqual(r!.body, {
    model: 'qwen3:8b',
    messages: [
      { role: 'system', content: 'You are a test.' },
      { role: 'user', content: 'hello' },
    ],
    tools: [
      { type: 'function', function: { name: 'list_files', description: 'List.', parameters: LIST_FILES.input_schema } },
    ],
    max_tokens: 321,
    // Streamed, with the usage asked for (a stream has none unless asked).
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.deepEqual(res, {
    model: 'qwen3:8b',
    content: [{ type: 'text', text: 'Hi there' }],
    stop_reason: 'end_turn',
    // prompt_tokens include the cached ones; deepq's input does not (as on the Messages API).
    usage: { input_tokens: 60, output_tokens: 7, cache_read_input_tokens: 40, cache_creation_input_tokens: 0 },
  });
});

test('tool calls round-trip through the agent loop: ids, names, arguments and results', async () => {
  let n = 0;
  server.setHandler(() => {
    n++;
    if (n === 1)
      return {
        content: 'Looking.',
        tool_calls: [
          { id: 'call_rt_1', name: 'list_files', arguments: { glob: '*.md' } },
          { id: 'call_rt_2', name: 'read_file', arguments: '{"name":"missing.md"}' },
        ],
      };
    return say('```\nok\n```');
  });
  const spec = RoleSpecSchema.parse({ name: 'rt', systemPrompt: 'You code.', tools: [] });
  const agent = createAgent(spec, {
    provider: provider(),
    logger: captureLogger().logger,
    models: { HIGH: 'h', LOW: 'l' },
  });
  const inputs: unknown[] = [];
  const from = server.requests.length;
  const run = await agent.run({
    task: 'list them',
    tools: [
      {
        def: LIST_FILES,
        run: async (input) => {
          inputs.push(input);
          return 'a.md\nb.md';
        },
      },
      {
        def: { ...LIST_FILES, name: 'read_file' },
        run: async () => {
          throw new Error('no such file: missing.md');
        },
      },
    ],
    contract: codeContract,
    ctx: ctxFor('rt'),
  });
  assert.equal(run.ok, true, run.problem);
  assert.deepEqual(inputs, [{ glob: '*.md' }]);
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 2);
  assert.ok(
    reqs.every((r) => r.response?.kind === 'completion'),
    'the server accepted both requests',
  );
  assert.deepEqual(reqs[1]!.body.messages.slice(1), [
    { role: 'user', content: 'list them' },
    {
      role: 'assistant',
      content: 'Looking.',
      tool_calls: [
        { id: 'call_rt_1', type: 'function', function: { name: 'list_files', arguments: '{"glob":"*.md"}' } },
        { id: 'call_rt_2', type: 'function', function: { name: 'read_file', arguments: '{"name":"missing.md"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_rt_1', content: 'a.md\nb.md' },
    { role: 'tool', tool_call_id: 'call_rt_2', content: 'error: no such file: missing.md' },
  ]);
});

test('the test server rejects what the real API rejects: a tool message without its call', async () => {
  // The same SDK, by hand: proves the round trip above could have failed.
  const { default: OpenAI } = await import('openai');
  const client = new OpenAI({ apiKey: FAKE_OPENAI_KEY, baseURL: server.baseURL, maxRetries: 0 });
  server.setHandler(() => say('never'));
  const bad = [
    { role: 'system', content: 's' },
    { role: 'user', content: 'u' },
    { role: 'tool', tool_call_id: 'call_orphan', content: 'x' },
  ] as never;
  await assert.rejects(
    client.chat.completions.create({ model: 'm', messages: bad }),
    /must be a response to a preceed/,
  );
  const unanswered = [
    { role: 'user', content: 'u' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
    },
    { role: 'user', content: 'again' },
  ] as never;
  await assert.rejects(
    client.chat.completions.create({ model: 'm', messages: unanswered }),
    /did not have response messages: c1/,
  );
  await assert.rejects(
    client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'u' }], system: 'x' } as never),
    /Unrecognized request argument supplied: system/,
  );
});

test('stop reasons, and what lax servers send: no ids, arguments that are not JSON, no model', async () => {
  const cases: [ChatHandlerResult, string][] = [
    [say('cut', { finish_reason: 'length' }), 'max_tokens'],
    [say('', { finish_reason: 'content_filter' }), 'refusal'],
    [say('done', { finish_reason: null }), 'end_turn'],
    // Some servers say `stop` for a turn that ends in tool calls: the calls decide.
    [{ ...callTool('list_files', {}), finish_reason: 'stop' }, 'tool_use'],
  ];
  // Not streamed: a lax server's answer without a finish reason is taken as ended (a stream without
  // one may have been cut short: it is a malformed answer, retried).
  for (const [reply, stop] of cases)
    assert.equal((await once(reply, 5000, REQ, false)).res!.stop_reason, stop, JSON.stringify(reply));
  for (const [reply, stop] of cases.filter(([r]) => (r as { finish_reason?: unknown }).finish_reason !== null))
    assert.equal((await once(reply)).res!.stop_reason, stop, `streamed ${JSON.stringify(reply)}`);
  assert.equal((await once(say('done', { finish_reason: null }))).err?.kind, 'malformed');
  server.setHandler(() => ({ status: 200, body: laxCompletion() }));
  const res = await provider({ stream: false }).createMessage(REQ, CTX);
  assert.equal(res.model, 'qwen3:8b', 'no model in the answer: the requested one');
  const [a, b] = res.content as { type: string; id: string; input: unknown }[];
  assert.match(a!.id, /^call_[0-9a-f]{32}$/, 'a missing id is made up, so the result can answer it');
  assert.deepEqual(a!.input, {}, 'empty arguments are no arguments');
  // Not JSON: passed on as text, for the tool's schema check to refuse with a reason.
  assert.equal(b!.input, '{"name": "x"');
  // Content as an array of parts (some compatible servers): the text parts, joined.
  const parts = [{ type: 'text', text: 'THE ' }, { type: 'refusal' }, { type: 'text', text: 'ANSWER' }];
  const partsBody = { choices: [{ finish_reason: 'stop', message: { role: 'assistant', content: parts } }] };
  server.setHandler(() => ({ status: 200, body: partsBody }));
  assert.deepEqual((await provider({ stream: false }).createMessage(REQ, CTX)).content, [
    { type: 'text', text: 'THE ANSWER' },
  ]);
  // A refusal in its own field (content null): a refusal with its text, not an empty answer.
  const refused = { role: 'assistant', content: null, refusal: 'I can not help with that.' };
  server.setHandler(() => ({ status: 200, body: { choices: [{ finish_reason: 'stop', message: refused }] } }));
  const res2 = await provider({ stream: false }).createMessage(REQ, CTX);
  assert.equal(res2.stop_reason, 'refusal');
  assert.deepEqual(res2.content, [{ type: 'text', text: 'I can not help with that.' }]);
});

function laxCompletion() {
  return {
    choices: [
      {
        finish_reason: 'tool_calls',
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [
            { type: 'function', function: { name: 'list_files', arguments: '' } },
            { id: 'c2', type: 'function', function: { name: 'read_file', arguments: '{"name": "x"' } },
          ],
        },
      },
    ],
    usage: { prompt_tokens: 3, completion_tokens: 4 },
  };
}

test('a server that reports no usage: estimated, flagged, said once', async () => {
  const origins: UsageOrigin[] = [];
  const p = provider();
  const mw = tokenAccounting({ usageSink: async (_c, _m, _u, _r, origin) => void origins.push(origin!) });
  server.setHandler(() => say('a fairly long answer of some forty characters', { usage: null }));
  for (let i = 0; i < 2; i++) {
    const res = await mw({ ...REQ, model: 'local:qwen3:8b' }, CTX, (req) =>
      p.createMessage({ ...req, model: 'qwen3:8b' }, CTX),
    );
    assert.equal(res.usage.estimated, true);
    assert.ok(res.usage.input_tokens > 10 && res.usage.output_tokens > 5, JSON.stringify(res.usage));
  }
  assert.deepEqual(origins, [
    { requested: 'local:qwen3:8b', estimated: true },
    { requested: 'local:qwen3:8b', estimated: true },
  ]);
  assert.deepEqual(p.warned, ['local/qwen3:8b'], 'the warning is given once per provider');
  server.setHandler(() => say('counted'));
  assert.equal((await p.createMessage(REQ, CTX)).usage.estimated, undefined);
});

test('usage that is no count is estimated; more cached tokens than prompt tokens are capped', async () => {
  const p = provider();
  const answer = (usage: Record<string, unknown>) => say('x', { usage: usage as never });
  server.setHandler(() => answer({ prompt_tokens: 10, completion_tokens: -3, cached_tokens: 0 }));
  assert.equal((await p.createMessage(REQ, CTX)).usage.estimated, true);
  server.setHandler(() => answer({ prompt_tokens: 10, completion_tokens: 2, cached_tokens: 25 }));
  assert.deepEqual((await p.createMessage(REQ, CTX)).usage, {
    input_tokens: 0,
    output_tokens: 2,
    cache_read_input_tokens: 10,
    cache_creation_input_tokens: 0,
  });
});

test('the fault matrix maps each fault to the same kinds as the Anthropic provider', { timeout: 30_000 }, async () => {
  const cases: {
    name: string;
    result: ChatHandlerResult;
    kind: ModelCallError['kind'];
    status?: number;
    after?: number;
  }[] = [
    {
      name: '429 + retry-after',
      result: chatError(429, 'slow down', { 'retry-after': '2' }),
      kind: 'rate_limit',
      status: 429,
      after: 2000,
    },
    {
      name: '429 + retry-after-ms',
      result: chatError(429, 'slow', { 'retry-after-ms': '150' }),
      kind: 'rate_limit',
      after: 150,
    },
    {
      name: '429 + retry-after: 0',
      result: chatError(429, 'slow', { 'retry-after': '0' }),
      kind: 'rate_limit',
      after: 0,
    },
    { name: '500', result: chatError(500, 'internal'), kind: 'server', status: 500 },
    { name: '503 + retry-after', result: chatError(503, 'busy', { 'retry-after': '1' }), kind: 'server', after: 1000 },
    { name: '408', result: chatError(408, 'request timeout'), kind: 'server', status: 408 },
    { name: 'connection reset', result: 'reset', kind: 'connection' },
    { name: 'timeout', result: 'hang', kind: 'timeout' },
    { name: 'body stalls after the headers', result: 'stall', kind: 'timeout' },
    { name: 'malformed JSON body', result: { status: 200, body: '{"id": "chatcmpl-1", "cho' }, kind: 'malformed' },
    {
      name: 'JSON without choices',
      result: { status: 200, body: { id: 'x', object: 'chat.completion' } },
      kind: 'malformed',
    },
    {
      name: 'not JSON at all',
      result: { status: 200, headers: { 'content-type': 'text/html' }, body: '<html/>' },
      kind: 'malformed',
    },
    {
      name: 'a tool call without a name',
      result: { status: 200, body: { choices: [{ message: { tool_calls: [{ id: 'c' }] } }] } },
      kind: 'malformed',
    },
    { name: '400', result: chatError(400, 'bad request'), kind: 'client', status: 400 },
    { name: '401', result: chatError(401, 'invalid api key'), kind: 'client', status: 401 },
    { name: '404 model', result: chatError(404, 'model "x" not found'), kind: 'client', status: 404 },
  ];
  for (const [c, stream] of cases.flatMap((c) => [[c, true] as const, [c, false] as const])) {
    const { err, reqs } = await once(c.result, 300, REQ, stream);
    assert.ok(err instanceof ModelCallError, `${c.name} (stream ${stream}): ${String(err)}`);
    assert.equal(err.kind, c.kind, `${c.name}: ${err.message}`);
    assert.equal(err.retryable, c.kind !== 'client', c.name);
    if (c.status) assert.equal(err.status, c.status, c.name);
    if (c.after !== undefined) assert.equal(err.retryAfterMs, c.after, c.name);
    assert.equal(reqs.length, 1, `${c.name}: the SDK made exactly one request (its retries are off)`);
    assert.ok(!err.message.includes(FAKE_OPENAI_KEY), `${c.name}: the key is not in the error`);
  }
  const ac = new AbortController();
  server.setHandler(() => 'hang');
  const pending = provider().createMessage(REQ, { ...CTX, signal: ac.signal });
  setTimeout(() => ac.abort(), 50);
  await assert.rejects(pending, (e: ModelCallError) => e.kind === 'aborted');
});

test('a server without tool calling: a clear error at the first call with tools, not retried', async () => {
  const noTools = await startChatCompletionsServer({ toolCalling: false });
  try {
    const spec = RoleSpecSchema.parse({ name: 'critic', systemPrompt: 'You review.', tools: [] });
    const deps = {
      provider: provider({ s: noTools }),
      logger: captureLogger().logger,
      models: { HIGH: 'h', LOW: 'qwen' },
    };
    const tools = [{ def: LIST_FILES, run: async () => '' }];
    await assert.rejects(
      createAgent(spec, { ...deps, retry: { baseDelayMs: 1 } }).run({
        task: 't',
        tools,
        contract: textContract,
        ctx: ctxFor('critic'),
      }),
      (err: ModelCallError) =>
        err.kind === 'client' &&
        /provider "local" \(http:\/\/127\.0\.0\.1:\d+\/v1\) refused tool calling for model "h"/.test(err.message) &&
        /may not support tools.*does not support tools/.test(err.message),
    );
    assert.equal(noTools.requests.length, 1, 'not retried');
    // The same server serves an agent without tools.
    const run = await createAgent(spec, deps).run({ task: 't', contract: textContract, ctx: ctxFor('critic') });
    assert.equal(run.ok, true);
  } finally {
    await noTools.close();
  }
});

test("a 5xx naming tools is a fault, retried; llama.cpp's 500 refusing tools is a refusal, not retried", async () => {
  const spec = RoleSpecSchema.parse({ name: 'critic', systemPrompt: 'You review.', tools: [] });
  const tools = [{ def: LIST_FILES, run: async () => '' }];
  const run = () =>
    createAgent(spec, {
      provider: provider(),
      logger: captureLogger().logger,
      models: { HIGH: 'h', LOW: 'qwen' },
      retry: { baseDelayMs: 1 },
    }).run({ task: 't', tools, contract: textContract, ctx: ctxFor('critic') });
  const faults: ChatHandlerResult[] = [chatError(500, 'tool parser failed: requires valid JSON')];
  server.setHandler(() => faults.shift() ?? say('fine'));
  assert.equal((await run()).ok, true, 'a transient 500 about a tool parser was not retried');
  server.setHandler(() => chatError(500, 'tools param requires --jinja flag'));
  const before = server.requests.length;
  await assert.rejects(
    run(),
    (err: ModelCallError) => err.kind === 'client' && /refused tool calling/.test(err.message),
  );
  assert.equal(server.requests.length - before, 1, 'the refusal was retried');
});

test("deepq's retry middleware retries 5xx and waits out a 429's retry-after on this provider too", async () => {
  const spec = RoleSpecSchema.parse({ name: 'r', systemPrompt: 'You help.', tier: 'LOW' });
  const faults: ChatHandlerResult[] = [chatError(500, 'oops'), chatError(429, 'slow', { 'retry-after': '1' })];
  server.setHandler(() => faults.shift() ?? say('fine', { usage: { prompt_tokens: 9, completion_tokens: 2 } }));
  const booked: number[] = [];
  const agent = createAgent(spec, {
    provider: provider(),
    logger: captureLogger().logger,
    models: { HIGH: 'h', LOW: 'small' },
    retry: { baseDelayMs: 1 },
    usageSink: async (_c, _m, u) => void booked.push(u.input),
  });
  const from = server.requests.length;
  const run = await agent.run({ task: 'go', contract: textContract, ctx: ctxFor('r') });
  assert.equal(run.text, 'fine');
  const reqs = server.requests.slice(from);
  assert.deepEqual(
    reqs.map((r) => r.response?.status),
    [500, 429, 200],
  );
  assert.ok(
    reqs.every((r) => r.rawBody === reqs[0]!.rawBody),
    'the same request each time',
  );
  assert.ok(reqs[2]!.receivedAt - reqs[1]!.receivedAt >= 990, 'retry-after was honoured');
  assert.deepEqual(booked, [9], 'failed attempts book nothing; the answer once');
});

/**
 * A config's openai provider options on the wire, built the way services build it: the file
 * through loadConfig, then createProvider (its router picks the provider by the model ref).
 */
function fromConfig(options: Record<string, unknown>, extraEnv: NodeJS.ProcessEnv = {}) {
  const file = writeConfig({
    providers: { local: server.providerConfig(options) },
    models: { HIGH: 'local:big', LOW: 'local:small' },
  });
  // A default timeout far above the provider's own: only its own can cut a call in time.
  const env = server.env({
    DEEPQ_CONFIG: file,
    DEEPQ_MODEL_TIMEOUT_MS: '60000',
    TEAM_TOKEN: 'team-secret-7',
    ...extraEnv,
  });
  return createProvider(loadConfig(env));
}

async function callFromConfig(p: ModelProvider) {
  const from = server.requests.length;
  const started = Date.now();
  try {
    const res = await p.createMessage({ ...REQ, model: 'local:qwen3:8b' }, CTX);
    return { res, err: undefined, ms: Date.now() - started, reqs: server.requests.slice(from) };
  } catch (err) {
    return { res: undefined, err: err as ModelCallError, ms: Date.now() - started, reqs: server.requests.slice(from) };
  }
}

test('a config’s timeoutMs, maxRetries and headers (from env too) reach the wire', { timeout: 30_000 }, async () => {
  const headers = { 'X-Team': { env: 'TEAM_TOKEN' }, 'X-Plain': 'plain-value' };
  const p = fromConfig({ timeoutMs: 1500, maxRetries: 1, headers });
  server.setHandler(() => say('hello'));
  const ok = await callFromConfig(p);
  assert.equal(ok.res?.model, 'local:qwen3:8b', ok.err?.message);
  const [r] = ok.reqs;
  assert.equal(r!.headers['x-team'], 'team-secret-7', 'the header’s value from its variable');
  assert.equal(r!.headers['x-plain'], 'plain-value');
  assert.equal(r!.apiKey, FAKE_OPENAI_KEY);
  // maxRetries 1: a 500 is retried once by the SDK, the same request; two 500s fail after two requests.
  let faults: ChatHandlerResult[] = [chatError(500, 'once')];
  server.setHandler(() => faults.shift() ?? say('after a retry'));
  const retried = await callFromConfig(p);
  assert.equal(retried.err, undefined);
  assert.deepEqual(
    retried.reqs.map((q) => q.response?.status),
    [500, 200],
  );
  assert.equal(retried.reqs[1]!.rawBody, retried.reqs[0]!.rawBody);
  assert.equal(retried.reqs[1]!.headers['x-team'], 'team-secret-7', 'the retry carries the header too');
  faults = [chatError(500, 'one'), chatError(500, 'two'), chatError(500, 'three')];
  const failed = await callFromConfig(p);
  assert.equal(failed.err?.kind, 'server');
  assert.equal(failed.reqs.length, 2, 'one try and maxRetries (1) retries, no more');
  // timeoutMs 1500 (not the 60 s default): a server that never answers, or stalls mid-body, is cut.
  for (const stuck of ['hang', 'stall'] as const) {
    server.setHandler(() => stuck);
    const cut = await callFromConfig(p);
    assert.equal(cut.err?.kind, 'timeout', `${stuck}: ${cut.err?.message}`);
    assert.ok(cut.ms >= 1400 && cut.ms < 5000, `${stuck}: cut after ${cut.ms} ms`);
  }
  // The default: no SDK retries (deepq's retry middleware owns them).
  server.setHandler(() => chatError(500, 'no retry'));
  assert.equal((await callFromConfig(fromConfig({}))).reqs.length, 1);
});

test('a config’s stream and maxCallMs, and DEEPQ_MODEL_MAX_CALL_MS, reach the call', { timeout: 30_000 }, async () => {
  const slow = say('x'.repeat(400), { stream: { chunk: 10, delayMs: 30 } });
  server.setHandler(() => slow);
  // About 1.2 s of steady streaming: past a whole-call limit of 600 ms, from the provider or the default.
  for (const p of [fromConfig({ maxCallMs: 600 }), fromConfig({}, { DEEPQ_MODEL_MAX_CALL_MS: '600' })]) {
    const cut = await callFromConfig(p);
    assert.ok(cut.err?.kind === 'timeout' && /took over 0\.6 s/.test(cut.err.message), String(cut.err));
  }
  const ok = await callFromConfig(fromConfig({ maxCallMs: 10_000 }, { DEEPQ_MODEL_MAX_CALL_MS: '600' }));
  assert.equal(ok.err, undefined, 'the provider’s own limit wins over the default');
  // stream: false: the request asks for no stream, and the answer comes whole.
  const plain = await callFromConfig(fromConfig({ stream: false }));
  assert.equal(plain.err, undefined, String(plain.err));
  assert.equal(plain.reqs[0]!.body.stream, undefined);
  assert.equal(plain.reqs[0]!.body.stream_options, undefined);
  assert.equal(plain.res!.content.length, 1);
});

test('the id an endpoint answers with is booked only when plain and short; else the id asked for', async () => {
  const p = fromConfig({});
  const served = async (model: string) => {
    server.setHandler(() => say('ok', { model }));
    const { res, err } = await callFromConfig(p);
    assert.equal(err, undefined);
    return res!.model;
  };
  assert.equal(await served('qwen3-8b-instruct-q4_K_M'), 'local:qwen3-8b-instruct-q4_K_M');
  assert.equal(await served('org/model@v2:latest'), 'local:org/model@v2:latest');
  // A field of the goal's usage and a row of `deepq status` each: never what an odd gateway invents.
  for (const odd of ['m'.repeat(129), 'evil\u001b[2J', 'a|b', 'two words', 'модель'])
    assert.equal(await served(odd), 'local:qwen3:8b', JSON.stringify(odd));
});
