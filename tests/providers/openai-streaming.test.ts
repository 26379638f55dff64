// Streamed Chat Completions through the real `openai` SDK against the local server: a slow local
// model's long answer is not cut by the idle timeout (where the same answer sent whole is), a
// stream that goes quiet is given up, tool calls and the usage chunk are put together, and a
// stream cut short is a retryable fault, never half an answer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { OpenAIProvider } from '../../shared/agent/providers/openai.ts';
import { type CallContext, ModelCallError, type ModelRequest } from '../../shared/agent/providers/types.ts';
import {
  type ChatCompletionsServer,
  type ChatHandlerResult,
  callTool,
  FAKE_OPENAI_KEY,
  say,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';

let server: ChatCompletionsServer;
before(async () => {
  server = await startChatCompletionsServer();
});
after(async () => {
  await server?.close();
});

const CTX: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
const REQ: ModelRequest = {
  model: 'qwen3:8b',
  system: 'You are a test.',
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 4000,
};
const LONG = 'dolor sit amet '.repeat(160);

async function call(
  reply: ChatHandlerResult | (() => Promise<ChatHandlerResult>),
  timeoutMs: number,
  opts: { stream?: boolean; maxCallMs?: number } = {},
) {
  server.setHandler(typeof reply === 'function' ? reply : () => reply);
  const from = server.requests.length;
  const started = performance.now();
  const provider = new OpenAIProvider({
    name: 'local',
    baseURL: server.baseURL,
    apiKey: FAKE_OPENAI_KEY,
    timeoutMs,
    ...opts,
  });
  try {
    const res = await provider.createMessage(REQ, CTX);
    return { res, err: undefined, ms: performance.now() - started, req: server.requests[from]! };
  } catch (err) {
    return { res: undefined, err: err as ModelCallError, ms: performance.now() - started, req: server.requests[from]! };
  }
}

test('a long answer that keeps streaming outlasts the idle timeout; the same answer sent whole does not', async () => {
  const streamed = await call(say(LONG, { stream: { chunk: 20, delayMs: 25 } }), 1000, { maxCallMs: 20_000 });
  assert.equal(streamed.err, undefined, String(streamed.err));
  assert.ok(streamed.ms > 2000, `it streamed for ${Math.round(streamed.ms)} ms`);
  assert.deepEqual(streamed.res!.content, [{ type: 'text', text: LONG }]);
  assert.equal(streamed.res!.stop_reason, 'end_turn');
  const slowWhole = async () => {
    await new Promise((r) => setTimeout(r, 3000));
    return say(LONG);
  };
  const whole = await call(slowWhole, 1000, { stream: false });
  assert.ok(whole.err instanceof ModelCallError && whole.err.kind === 'timeout', String(whole.err));
});

test('a stream that goes quiet is given up after the idle timeout; the whole call has its own limit', async () => {
  const quiet = await call(say(LONG, { stream: { chunk: 40, stallAfter: 5 } }), 300, { maxCallMs: 60_000 });
  assert.ok(quiet.err?.kind === 'timeout' && /nothing received for 0\.3 s/.test(quiet.err.message), String(quiet.err));
  assert.ok(quiet.ms < 5000, `gave up after ${Math.round(quiet.ms)} ms`);
  const stalled = await call('stall', 300, { maxCallMs: 60_000 });
  assert.equal(stalled.err?.kind, 'timeout', String(stalled.err));
  const steady = await call(say(LONG, { stream: { chunk: 10, delayMs: 20 } }), 300, { maxCallMs: 700 });
  assert.ok(steady.err?.kind === 'timeout' && /took over 0\.7 s/.test(steady.err.message), String(steady.err));
});

test('tool calls streamed in pieces arrive whole, and the usage chunk is booked', async () => {
  const args = { path: 'src/x.ts', deep: { n: [1, 2, 3], s: 'a "quoted" \\ text' } };
  const reply = {
    ...callTool('read_file', args, { id: 'call_s1' }),
    usage: { prompt_tokens: 50, completion_tokens: 9, cached_tokens: 20 },
    stream: { chunk: 4 },
  };
  const { res, err } = await call(reply, 2000);
  assert.equal(err, undefined, String(err));
  assert.equal(res!.stop_reason, 'tool_use');
  assert.deepEqual(res!.content, [{ type: 'tool_use', id: 'call_s1', name: 'read_file', input: args }]);
  assert.deepEqual(res!.usage, {
    input_tokens: 30,
    output_tokens: 9,
    cache_read_input_tokens: 20,
    cache_creation_input_tokens: 0,
  });
});

test("a lax server's tool call pieces without index or type (Ollama, Gemini) arrive as whole calls", async () => {
  const args = { path: 'notes/a.md', content: 'x'.repeat(30) };
  const two = {
    content: null,
    tool_calls: [
      { id: 'call_a', name: 'write_file', arguments: args },
      { id: 'call_b', name: 'read_file', arguments: { path: 'b.md' } },
    ],
  };
  const expected = [
    { type: 'tool_use', id: 'call_a', name: 'write_file', input: args },
    { type: 'tool_use', id: 'call_b', name: 'read_file', input: { path: 'b.md' } },
  ];
  for (const without of [['index'], ['type'], ['index', 'type']] as const) {
    const { res, err } = await call({ ...two, stream: { chunk: 8, toolCallsWithout: [...without] } }, 2000);
    assert.equal(err, undefined, `without ${without}: ${err}`);
    assert.equal(res!.stop_reason, 'tool_use', `without ${without}`);
    assert.deepEqual(res!.content, expected, `without ${without}`);
  }
});

test('a stream cut short is a malformed answer, retried; a stream without usage is estimated', async () => {
  const cut = await call(say(LONG, { stream: { endAfter: 4 } }), 2000);
  assert.ok(cut.err?.kind === 'malformed' && cut.err.retryable, String(cut.err));
  const noUsage = await call(say('forty characters of answer, give or take', { usage: null }), 2000);
  assert.equal(noUsage.err, undefined, String(noUsage.err));
  assert.equal(noUsage.res!.usage.estimated, true);
  assert.ok(noUsage.res!.usage.output_tokens > 5, JSON.stringify(noUsage.res!.usage));
});

test('the first content or tool-call delta is timed once (not the empty role delta before it)', async () => {
  for (const reply of [
    say('some text', { stream: { delayMs: 150 } }),
    { ...callTool('list_files', {}), stream: { delayMs: 150 } },
  ]) {
    server.setHandler(() => reply);
    const seen: number[] = [];
    const started = performance.now();
    const provider = new OpenAIProvider({
      name: 'local',
      baseURL: server.baseURL,
      apiKey: FAKE_OPENAI_KEY,
      timeoutMs: 5000,
    });
    await provider.createMessage(REQ, { ...CTX, onFirstOutput: () => seen.push(performance.now() - started) });
    assert.equal(seen.length, 1);
    // The role delta goes out at once, the first real delta 150 ms after it.
    assert.ok(seen[0]! >= 120, `first output at ${Math.round(seen[0]!)} ms`);
  }
});
