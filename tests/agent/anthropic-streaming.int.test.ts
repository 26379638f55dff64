// Streamed answers through the real @anthropic-ai/sdk against the local Messages-API server: a
// long answer that keeps streaming is never cut by the idle timeout (where the same answer sent
// whole is), a stream that goes quiet is given up, the whole call has its own limit, and a stream
// that breaks midway (an error event, an end before the stop reason) is a retryable fault.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { codeContract } from '../../shared/agent/output-contracts.ts';
import { createProvider } from '../../shared/agent/providers/index.ts';
import { type CallContext, ModelCallError, type ModelRequest } from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';
import { anthropicAt, captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  FAKE_API_KEY,
  type HandlerResult,
  type MessagesApiServer,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { sseFrame } from '../../testing/recording-server.ts';

let server: MessagesApiServer;
useMessagesApi(null, (s) => (server = s));

const CTX: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
const REQ: ModelRequest = {
  model: 'model-s',
  system: [{ type: 'text', text: 'You are a test.' }],
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 4000,
};
const LONG = 'lorem ipsum '.repeat(200);

async function call(
  reply: HandlerResult | (() => Promise<HandlerResult>),
  timeoutMs: number,
  opts: { stream?: boolean; maxCallMs?: number; signal?: AbortSignal } = {},
) {
  server.setHandler(typeof reply === 'function' ? reply : () => reply);
  const from = server.requests.length;
  const started = performance.now();
  const { signal, ...providerOpts } = opts;
  try {
    const res = await anthropicAt(server, timeoutMs, providerOpts).createMessage(REQ, { ...CTX, signal });
    return { res, err: undefined, ms: performance.now() - started, req: server.requests[from]! };
  } catch (err) {
    return { res: undefined, err: err as ModelCallError, ms: performance.now() - started, req: server.requests[from]! };
  }
}

const timeoutError = (err: unknown, words: RegExp) =>
  err instanceof ModelCallError && err.kind === 'timeout' && err.retryable && words.test(err.message);

test('a long answer that keeps streaming outlasts the idle timeout; the same answer sent whole does not', async () => {
  // 120 deltas 25 ms apart: about 3 s in all, never 1 s without an event (400 ms flaked on a loaded machine).
  const streamed = await call(text(LONG, { stream: { chunk: 20, delayMs: 25 } }), 1000, { maxCallMs: 20_000 });
  assert.equal(streamed.err, undefined, String(streamed.err));
  assert.ok(streamed.ms > 2000, `it streamed for ${Math.round(streamed.ms)} ms`);
  assert.equal(streamed.res!.content.length, 1);
  assert.equal((streamed.res!.content[0] as { text: string }).text, LONG, 'the deltas put together');
  assert.equal(streamed.res!.stop_reason, 'end_turn');
  // Not streamed, the answer arrives whole after the same 3 s: the timeout covers all of it.
  const slowWhole = async () => {
    await new Promise((r) => setTimeout(r, 3000));
    return text(LONG);
  };
  const whole = await call(slowWhole, 1000, { stream: false });
  assert.ok(timeoutError(whole.err, /nothing received for 1 s/), String(whole.err));
});

test('a stream that goes quiet midway is given up after the idle timeout, and the server sees it go', async () => {
  const { err, ms, req } = await call(text(LONG, { stream: { chunk: 40, stallAfter: 6 } }), 300, { maxCallMs: 60_000 });
  assert.ok(timeoutError(err, /nothing received for 0\.3 s/), String(err));
  assert.ok(ms < 5000, `gave up after ${Math.round(ms)} ms`);
  await waitFor(() => req.abortedAt !== undefined);
});

test('an endpoint that never sends its first event is given up after the idle timeout', async () => {
  const { err } = await call('hang', 300, { maxCallMs: 60_000 });
  assert.ok(timeoutError(err, /nothing received/), String(err));
  const stalled = await call('stall', 300, { maxCallMs: 60_000 });
  assert.ok(timeoutError(stalled.err, /nothing received/), String(stalled.err));
});

test('the whole call has its own limit, however steadily it streams', async () => {
  const { err, ms } = await call(text(LONG, { stream: { chunk: 10, delayMs: 20 } }), 300, { maxCallMs: 700 });
  assert.ok(timeoutError(err, /the answer took over 0\.7 s/), String(err));
  assert.ok(ms < 5000, `gave up after ${Math.round(ms)} ms`);
});

test('a tool call streamed in pieces arrives whole, with the usage of both ends of the stream', async () => {
  const input = { path: 'src/a b.ts', deep: { list: [1, 2, 3], s: 'quote " and \\ slash' } };
  const reply = toolUse('read_file', input, { id: 'toolu_s1', text: 'Reading it.' });
  const usage = { input_tokens: 21, output_tokens: 34, cache_read_input_tokens: 5, cache_creation_input_tokens: 8 };
  const { res, err } = await call({ ...reply, usage, stream: { chunk: 3 } }, 2000);
  assert.equal(err, undefined, String(err));
  assert.equal(res!.stop_reason, 'tool_use');
  assert.deepEqual(res!.content, [
    { type: 'text', text: 'Reading it.' },
    { type: 'tool_use', id: 'toolu_s1', name: 'read_file', input },
  ]);
  assert.deepEqual(res!.usage, usage, 'input counts from message_start, output from message_delta');
});

test('a stream without usage is estimated; a tool input that is not whole JSON goes on as its text', async () => {
  const sse = { 'content-type': 'text/event-stream' };
  const started = { id: 'msg_g', type: 'message', role: 'assistant', model: 'm', content: [] };
  const tool = (id: string) => ({ type: 'tool_use', id, name: 'write_file', input: {} });
  const json = (index: number, partial: string) => ({
    type: 'content_block_delta',
    index,
    delta: { type: 'input_json_delta', partial_json: partial },
  });
  const frames = [
    sseFrame('message_start', { type: 'message_start', message: started }),
    sseFrame('content_block_start', { type: 'content_block_start', index: 0, content_block: tool('toolu_a') }),
    sseFrame('content_block_delta', json(0, '{"path":"notes.md","content":"v2","append": tr')),
    sseFrame('content_block_stop', { type: 'content_block_stop', index: 0 }),
    sseFrame('content_block_start', { type: 'content_block_start', index: 1, content_block: tool('toolu_b') }),
    sseFrame('content_block_delta', json(1, '{"path":"b.md",')),
    sseFrame('content_block_delta', json(1, '"content":"whole"}')),
    sseFrame('content_block_stop', { type: 'content_block_stop', index: 1 }),
    sseFrame('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use' } }),
    sseFrame('message_stop', { type: 'message_stop' }),
  ].join('');
  const { res, err } = await call({ status: 200, headers: sse, body: frames }, 2000);
  assert.equal(err, undefined, String(err));
  assert.deepEqual(
    res!.content.map((b) => (b.type === 'tool_use' ? b.input : b)),
    ['{"path":"notes.md","content":"v2","append": tr', { path: 'b.md', content: 'whole' }],
    'a broken input as its text (the tool refuses it), a whole one parsed',
  );
  assert.equal(res!.usage.estimated, true);
  assert.ok(res!.usage.input_tokens > 0 && res!.usage.output_tokens > 0, JSON.stringify(res!.usage));
});

test('a stream that breaks midway is a fault the retry policy acts on', async () => {
  const overloaded = await call(text(LONG, { stream: { errorAfter: 5 } }), 2000);
  assert.ok(overloaded.err instanceof ModelCallError, String(overloaded.err));
  assert.equal(overloaded.err.kind, 'rate_limit', 'overloaded mid-stream backs off, as a 529 does');
  assert.equal(overloaded.err.status, 529);
  assert.match(overloaded.err.message, /overloaded_error: Overloaded/);
  const apiError = await call(
    text(LONG, { stream: { errorAfter: 3, error: { type: 'api_error', message: 'x' } } }),
    2000,
  );
  assert.equal(apiError.err?.kind, 'server');
  assert.equal(apiError.err?.retryable, true);
  // The response ends after some deltas: no stop reason, so no answer (never half of one).
  const cut = await call(text(LONG, { stream: { endAfter: 5 } }), 2000);
  assert.equal(cut.err?.kind, 'malformed', String(cut.err));
  assert.equal(cut.err?.retryable, true);
  // A gateway's stream that ends properly but never said why the answer stopped: not an answer.
  const started = { id: 'msg_g', type: 'message', role: 'assistant', model: 'm', content: [], usage: {} };
  const noStopReason = [
    sseFrame('message_start', { type: 'message_start', message: started }),
    sseFrame('message_stop', { type: 'message_stop' }),
  ].join('');
  const sse = { 'content-type': 'text/event-stream' };
  const unexplained = await call({ status: 200, headers: sse, body: noStopReason }, 2000);
  assert.equal(unexplained.err?.kind, 'malformed', String(unexplained.err));
  assert.match(unexplained.err!.message, /ended before its stop reason/);
  const reset = await call('reset', 2000);
  assert.equal(reset.err?.kind, 'connection', String(reset.err));
});

test('an abort midway closes the stream at once', async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 300);
  const { err, ms, req } = await call(text(LONG, { stream: { chunk: 10, delayMs: 30 } }), 5000, {
    signal: ac.signal,
    maxCallMs: 60_000,
  });
  assert.ok(err instanceof ModelCallError && err.kind === 'aborted', String(err));
  assert.ok(ms < 2000, `ended after ${Math.round(ms)} ms`);
  await waitFor(() => req.abortedAt !== undefined);
});

async function waitFor(cond: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const GW = { HIGH: 'gw:model-s', LOW: 'gw:model-s' };

test('a gateway provider of type anthropic: stream: false asks for the answer whole', async () => {
  const cfg = loadConfig(
    { GW_KEY: FAKE_API_KEY, DEEPQ_MODEL_MAX_CALL_MS: '600' },
    { providers: { gw: { type: 'anthropic', baseURL: server.url, apiKeyEnv: 'GW_KEY', stream: false } }, models: GW },
  );
  server.setHandler(() => text(LONG, { stream: { chunk: 10, delayMs: 30 } }));
  const from = server.requests.length;
  // The answer comes whole: the streaming pace (and the 600 ms whole-call limit) does not apply.
  const res = await createProvider(cfg).createMessage({ ...REQ, model: 'gw:model-s' }, CTX);
  assert.equal(server.requests[from]!.body.stream, undefined);
  assert.equal((res.content[0] as { text: string }).text, LONG);
  const streamedCfg = loadConfig(
    { GW_KEY: FAKE_API_KEY, DEEPQ_MODEL_MAX_CALL_MS: '600' },
    { providers: { gw: { type: 'anthropic', baseURL: server.url, apiKeyEnv: 'GW_KEY' } }, models: GW },
  );
  await assert.rejects(
    createProvider(streamedCfg).createMessage({ ...REQ, model: 'gw:model-s' }, CTX),
    (e: unknown) => e instanceof ModelCallError && e.kind === 'timeout' && /took over 0\.6 s/.test(e.message),
  );
});

test('the first delta of an answer is timed: once per call, on the metric of time to first output', async () => {
  // message_start, ping, the block's start, then its first delta: 3 pauses of 150 ms before it.
  const seen: number[] = [];
  const started = performance.now();
  server.setHandler(() => ({
    ...toolUse('read_file', { name: 'a.md' }, { id: 'toolu_f1' }),
    stream: { delayMs: 150, chunk: 4 },
  }));
  const onFirstOutput = () => seen.push(performance.now() - started);
  const res = await anthropicAt(server, 5000).createMessage(REQ, { ...CTX, onFirstOutput });
  const ended = performance.now() - started;
  assert.equal(res.stop_reason, 'tool_use');
  assert.equal(seen.length, 1, 'called once');
  assert.ok(
    seen[0]! >= 400 && seen[0]! < ended - 300,
    `first output at ${Math.round(seen[0]!)} ms of ${Math.round(ended)}`,
  );
  // Through the agent: the call lands on deepq_llm_time_to_first_output_seconds.
  const metrics = new Metrics();
  server.setHandler(() => text('```\nok\n```', { stream: { delayMs: 100 } }));
  const spec = RoleSpecSchema.parse({ name: 'ttft', systemPrompt: 'You code.', tools: [] });
  const agent = createAgent(spec, {
    provider: anthropicAt(server),
    logger: captureLogger().logger,
    models: { HIGH: 'h', LOW: 'l' },
    metrics,
  });
  const run = await agent.run({ task: 't', tools: [], contract: codeContract, ctx: ctxFor('ttft') });
  assert.equal(run.ok, true);
  const json = await metrics.llmFirstOutput.get();
  const count = json.values.find((v) => v.metricName === 'deepq_llm_time_to_first_output_seconds_count');
  const sum = json.values.find((v) => v.metricName === 'deepq_llm_time_to_first_output_seconds_sum');
  assert.equal(count?.value, 1);
  assert.equal(count?.labels.role, 'ttft');
  assert.ok(sum!.value >= 0.25, `${sum!.value} s`);
});
