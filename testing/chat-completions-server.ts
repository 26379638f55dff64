// A local HTTP server that speaks OpenAI Chat Completions (`POST /v1/chat/completions`), for
// testing deepq's openai provider through the real `openai` SDK (never a stub of it). It
// records every request (headers and parsed body) and lets the test decide each response: a
// completion (text and/or tool calls, any finish_reason, usage or none), an HTTP fault (429
// with retry-after, 500, a malformed body), a connection reset, or a hang.
//
// Like the real API it rejects (400) requests it would reject: a `tool` message that answers
// no preceding tool call, tool calls left without their `tool` messages, parameters it does
// not know (an Anthropic-shaped `system`, `cache_control`), malformed tool definitions. With
// `toolCalling: false` it refuses every request that offers tools, as Ollama does for a model
// without tool support.
//
// deepq processes reach it through a config file's provider entry (`providerConfig`), with
// the API key in the variable it names (`env`).

import {
  defaultAnswer,
  type MessagesBody,
  roleOf,
  type StreamPacing,
  type WireBlock,
  type WireMessage,
} from './messages-api-server.ts';
import {
  type Held,
  inPieces,
  type RawReply,
  type RecordedHttpRequest,
  type SseAnswer,
  sseFrame,
  startRecordingServer,
} from './recording-server.ts';

// ---- the wire shapes -------------------------------------------------------------------

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | { type: string; text?: string }[] | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  [k: string]: unknown;
}
export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** The parsed request body of `POST /v1/chat/completions`. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[];
  max_tokens?: number;
  max_completion_tokens?: number;
  stream?: boolean;
  [k: string]: unknown;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Of prompt_tokens, how many were read from the server's prompt cache. */
  cached_tokens: number;
}

/** What a handler returns for a completion; missing fields are filled in. */
export interface ChatReply {
  content?: string | null;
  tool_calls?: { id?: string; name: string; arguments: string | Record<string, unknown> }[];
  /** Default: `tool_calls` when there are calls, else `stop`. */
  finish_reason?: string | null;
  model?: string;
  /** null: the response has no usage at all (servers that do not report it). */
  usage?: Partial<ChatUsage> | null;
  /**
   * How a streamed answer goes out (see StreamPacing); ignored for a request not streamed.
   * `toolCallsWithout`: what a lax server leaves out of each tool call piece (Ollama, Gemini).
   */
  stream?: Omit<StreamPacing, 'errorAfter' | 'error'> & { toolCallsWithout?: ('index' | 'type')[] };
}

export type { RawReply };

export type ChatHandlerResult = ChatReply | RawReply | Held;
export type ChatHandler = (
  body: ChatBody,
  reqIndex: number,
  req: ChatRecordedRequest,
) => ChatHandlerResult | Promise<ChatHandlerResult>;

/** A request as received; `apiKey` is the token of `authorization: Bearer`. */
export interface ChatRecordedRequest extends RecordedHttpRequest<ChatBody> {
  response?: { kind: 'completion' | 'raw' | Held | 'rejected'; status?: number; body?: unknown };
}

export interface ChatCompletionsServer {
  /** `http://127.0.0.1:<port>/v1`: the provider's baseURL. */
  baseURL: string;
  port: number;
  requests: ChatRecordedRequest[];
  /** Requests answered with a completion. */
  completions(): ChatRecordedRequest[];
  setHandler(handler: ChatHandler): void;
  /** A `providers` entry for a deepq config file pointing here. */
  providerConfig(extra?: Record<string, unknown>): Record<string, unknown>;
  /** Environment a deepq process needs for that entry (the API key variable). */
  env(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const FAKE_OPENAI_KEY = 'sk-local-test-fake-0123456789abcdef';
/** The variable the provider entry names for its key (tests/deploy: not a deepq variable). */
export const KEY_VARIABLE = 'DEEPQ_TEST_LOCAL_KEY';

// ---- building replies ------------------------------------------------------------------

export function say(content: string, extra: Omit<ChatReply, 'content'> = {}): ChatReply {
  return { content, ...extra };
}

let callSeq = 0;
export function callTool(
  name: string,
  args: Record<string, unknown> | string,
  opts: { id?: string; content?: string } = {},
): ChatReply {
  const id = opts.id ?? `call_${Date.now().toString(36)}_${++callSeq}`;
  return { content: opts.content ?? null, tool_calls: [{ id, name, arguments: args }] };
}

export function chatError(status: number, message: string, headers: Record<string, string> = {}): RawReply {
  const type = status === 429 ? 'rate_limit_exceeded' : status >= 500 ? 'server_error' : 'invalid_request_error';
  return { status, headers, body: { error: { message, type, param: null, code: null } } };
}

// ---- reading requests ------------------------------------------------------------------

export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
}

/** The system prompt: the text of the system (and developer) messages. */
export function chatSystemText(body: Pick<ChatBody, 'messages'>): string {
  return body.messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => contentText(m.content))
    .join('\n\n');
}

/**
 * The request seen as a Messages-API body (system apart, tool calls as tool_use blocks, tool
 * messages as tool_result blocks), so the Messages-API server's default model answers it.
 */
export function messagesView(body: ChatBody): MessagesBody {
  const messages: WireMessage[] = [];
  for (const m of body.messages) {
    if (m.role === 'system' || m.role === 'developer') continue;
    if (m.role === 'user') messages.push({ role: 'user', content: contentText(m.content) });
    else if (m.role === 'assistant') {
      const text = contentText(m.content);
      const blocks: WireBlock[] = text ? [{ type: 'text', text }] : [];
      for (const c of m.tool_calls ?? [])
        blocks.push({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) });
      messages.push({ role: 'assistant', content: blocks });
    } else {
      const result: WireBlock = {
        type: 'tool_result',
        tool_use_id: m.tool_call_id ?? '',
        content: contentText(m.content),
      };
      const last = messages[messages.length - 1];
      if (last?.role === 'user' && Array.isArray(last.content) && last.content.every((b) => b.type === 'tool_result'))
        last.content.push(result);
      else messages.push({ role: 'user', content: [result] });
    }
  }
  const tools = (body.tools ?? []).map((t) => ({
    name: t.function.name,
    description: t.function.description,
    input_schema: t.function.parameters ?? {},
  }));
  return { model: body.model, max_tokens: body.max_tokens ?? 0, system: chatSystemText(body), messages, tools };
}

/** The text of the first user message (the agent's task). */
export function chatTask(body: Pick<ChatBody, 'messages'>): string {
  const first = body.messages.find((m) => m.role === 'user');
  return first ? contentText(first.content) : '';
}

// ---- validation, as the real API does it -----------------------------------------------

const KNOWN_PARAMS = new Set([
  'model',
  'messages',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_tokens',
  'max_completion_tokens',
  'reasoning_effort',
  'temperature',
  'top_p',
  'stream',
  'stream_options',
  'stop',
  'n',
  'seed',
  'user',
  'metadata',
  'store',
  'response_format',
  'reasoning_effort',
]);
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

function validateToolMessages(messages: ChatMessage[]): string | null {
  for (const [i, m] of messages.entries()) {
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string') return `messages[${i}].tool_call_id: Field required`;
      let j = i - 1;
      while (j >= 0 && messages[j]!.role === 'tool') j--;
      const calls = messages[j]?.role === 'assistant' ? (messages[j]!.tool_calls ?? []) : [];
      if (!calls.some((c) => c.id === m.tool_call_id))
        return (
          `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with ` +
          `'tool_calls'. (messages[${i}], tool_call_id ${m.tool_call_id})`
        );
    }
    if (m.role === 'assistant' && m.tool_calls?.length) {
      const answered = new Set<string>();
      for (let j = i + 1; j < messages.length && messages[j]!.role === 'tool'; j++)
        answered.add(String(messages[j]!.tool_call_id));
      const missing = m.tool_calls.map((c) => c.id).filter((id) => !answered.has(id));
      if (missing.length)
        return (
          "An assistant message with 'tool_calls' must be followed by tool messages responding to each " +
          `'tool_call_id'. The following tool_call_ids did not have response messages: ${missing.join(', ')}`
        );
    }
  }
  return null;
}

function validateMessage(m: ChatMessage, i: number): string | null {
  if (typeof m !== 'object' || m === null) return `messages[${i}]: must be an object`;
  if (!ROLES.has(m.role)) return `messages[${i}].role: must be one of system, developer, user, assistant, tool`;
  const c = m.content;
  if (c !== undefined && c !== null && typeof c !== 'string' && !Array.isArray(c))
    return `messages[${i}].content: must be a string or an array of content parts`;
  if (m.role === 'assistant') {
    if ((c === undefined || c === null) && !m.tool_calls?.length)
      return `messages[${i}]: an assistant message needs content or tool_calls`;
    for (const [j, call] of (m.tool_calls ?? []).entries()) {
      if (typeof call?.id !== 'string' || call.type !== 'function')
        return `messages[${i}].tool_calls[${j}]: needs an id and type "function"`;
      if (typeof call.function?.name !== 'string' || typeof call.function.arguments !== 'string')
        return `messages[${i}].tool_calls[${j}].function: needs a name and arguments as a string`;
    }
  } else if (m.tool_calls !== undefined) return `messages[${i}].tool_calls: only assistant messages have tool calls`;
  if (m.role !== 'assistant' && (c === undefined || c === null)) return `messages[${i}].content: Field required`;
  return null;
}

function validateTools(tools: unknown): string | null {
  if (!Array.isArray(tools)) return 'tools: must be an array';
  for (const [i, t] of (tools as ChatTool[]).entries()) {
    if (t?.type !== 'function') return `tools[${i}].type: must be "function"`;
    if (typeof t.function?.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(t.function.name))
      return `tools[${i}].function.name: must match ^[a-zA-Z0-9_-]{1,64}$`;
    const p = t.function.parameters;
    if (p !== undefined && (typeof p !== 'object' || p === null || Array.isArray(p)))
      return `tools[${i}].function.parameters: must be a JSON Schema object`;
  }
  return null;
}

/** The request's validation problem, as the real API would report it, or null. */
export function validateChatRequest(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'request body must be a JSON object';
  const b = body as ChatBody;
  const unknown = Object.keys(b).filter((k) => !KNOWN_PARAMS.has(k));
  if (unknown.length) return `Unrecognized request argument supplied: ${unknown.join(', ')}`;
  if (/"cache_control"\s*:/.test(JSON.stringify(b))) return 'Unrecognized request argument supplied: cache_control';
  if (typeof b.model !== 'string' || !b.model) return 'you must provide a model parameter';
  if (b.stream !== undefined && typeof b.stream !== 'boolean') return 'stream: must be a boolean';
  const effort = (b as { reasoning_effort?: unknown }).reasoning_effort;
  if (effort !== undefined && !['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'].includes(String(effort)))
    return `Invalid value for 'reasoning_effort': ${JSON.stringify(effort)}`;
  for (const k of ['max_tokens', 'max_completion_tokens'] as const)
    if (b[k] !== undefined && (!Number.isInteger(b[k]) || b[k]! < 1)) return `${k}: must be a positive integer`;
  if (!Array.isArray(b.messages) || b.messages.length === 0) return "[] is too short - 'messages'";
  for (const [i, m] of b.messages.entries()) {
    const problem = validateMessage(m, i);
    if (problem) return problem;
  }
  if (b.tools !== undefined) {
    const problem = validateTools(b.tools);
    if (problem) return problem;
  }
  return validateToolMessages(b.messages);
}

// ---- the default model -----------------------------------------------------------------

/**
 * A contract-valid model for every deepq role (the Messages-API server's, through
 * messagesView). On its first turn each subagent makes one tool call (research and
 * code-writer `list_files`, the critic `read_file` of the first file it was given).
 */
export const defaultChatHandler: ChatHandler = (body, reqIndex) => {
  const view = messagesView(body);
  const role = roleOf(view);
  const names = new Set((body.tools ?? []).map((t) => t.function.name));
  const firstTurn = view.messages.length === 1;
  if (firstTurn && (role === 'research' || role === 'code' || role === 'critic')) {
    const file = /^# (\S+)\n/m.exec(chatTask(body))?.[1];
    if (role === 'critic' && file && names.has('read_file'))
      return callTool('read_file', { name: file }, { id: `call_${reqIndex}_0` });
    if (names.has('list_files')) return callTool('list_files', {}, { id: `call_${reqIndex}_0` });
  }
  return say(defaultAnswer(view));
};

// ---- the server ------------------------------------------------------------------------

/** Rough token counts (chars / 4) of a request and an answer. */
export function estimateChatUsage(body: ChatBody, answer: unknown): ChatUsage {
  const prompt = Math.ceil((JSON.stringify(body.messages).length + JSON.stringify(body.tools ?? []).length) / 4);
  return {
    prompt_tokens: prompt,
    completion_tokens: Math.max(1, Math.ceil(JSON.stringify(answer).length / 4)),
    cached_tokens: 0,
  };
}

let completionSeq = 0;

/** The full chat.completion object for a reply. */
export function completionOf(body: ChatBody, out: ChatReply): Record<string, unknown> {
  const toolCalls = (out.tool_calls ?? []).map((c) => ({
    id: c.id ?? `call_auto_${++callSeq}`,
    type: 'function',
    function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
  }));
  const message = {
    role: 'assistant',
    content: out.content ?? null,
    refusal: null,
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const finish = out.finish_reason !== undefined ? out.finish_reason : toolCalls.length ? 'tool_calls' : 'stop';
  const completion: Record<string, unknown> = {
    id: `chatcmpl-test-${++completionSeq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: out.model ?? body.model,
    choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
  };
  if (out.usage !== null) {
    const u = { ...estimateChatUsage(body, message), ...out.usage };
    completion.usage = {
      prompt_tokens: u.prompt_tokens,
      completion_tokens: u.completion_tokens,
      total_tokens: u.prompt_tokens + u.completion_tokens,
      prompt_tokens_details: { cached_tokens: u.cached_tokens },
    };
  }
  return completion;
}

// ---- streaming -------------------------------------------------------------------------

const chunkHead = (body: ChatBody, id = 'chatcmpl-stream') => ({
  id,
  object: 'chat.completion.chunk',
  created: Math.floor(Date.now() / 1000),
  model: body.model,
});
const choiceDelta = (delta: Record<string, unknown>, finish: string | null = null) => ({
  index: 0,
  delta,
  finish_reason: finish,
  logprobs: null,
});
/** Each tool call's deltas: its id and name first, then its arguments in pieces; less what `without` says. */
function toolCallDeltas(calls: ChatToolCall[], n: number, without: string[] = []): Record<string, unknown>[] {
  const lax = (piece: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(piece).filter(([k]) => !without.includes(k)));
  return calls.flatMap((c, index) => [
    { tool_calls: [lax({ index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } })] },
    ...inPieces(c.function.arguments, n).map((a) => ({ tool_calls: [lax({ index, function: { arguments: a } })] })),
  ]);
}

/**
 * The completion as Chat Completions streams it: a role delta, the content in pieces, the tool
 * calls in pieces, the finish reason, the usage (asked with `stream_options.include_usage`), and
 * `[DONE]`; paced and broken as `pacing` says.
 */
function chunksOf(completion: Record<string, unknown>, body: ChatBody, pacing: ChatReply['stream'] = {}): SseAnswer {
  const head = { ...chunkHead(body, completion.id as string), model: completion.model };
  const choice = (completion.choices as { message: ChatMessage; finish_reason: string | null }[])[0]!;
  const n = pacing.chunk ?? 40;
  const content = typeof choice.message.content === 'string' ? inPieces(choice.message.content, n) : [];
  const deltas = [
    { role: 'assistant', content: '' },
    ...content.map((c) => ({ content: c })),
    ...toolCallDeltas(choice.message.tool_calls ?? [], n, pacing.toolCallsWithout),
  ];
  const wantsUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const events: SseAnswer['events'] = [
    ...deltas.map((d) => ({ event: '', data: { ...head, choices: [choiceDelta(d)] } })),
    { event: '', data: { ...head, choices: [choiceDelta({}, choice.finish_reason)] } },
    ...(wantsUsage && completion.usage ? [{ event: '', data: { ...head, choices: [], usage: completion.usage } }] : []),
    { event: '', data: '[DONE]' },
  ];
  return { events, delayMs: pacing.delayMs, stallAfter: pacing.stallAfter, endAfter: pacing.endAfter };
}

export interface ChatServerOptions {
  handler?: ChatHandler;
  /** Reject what the real API rejects (default true). */
  validate?: boolean;
  /** false: refuse every request that offers tools, as a server without tool calling does. */
  toolCalling?: boolean;
}

export async function startChatCompletionsServer(opts: ChatServerOptions = {}): Promise<ChatCompletionsServer> {
  let handler: ChatHandler = opts.handler ?? defaultChatHandler;

  const problemOf = (rec: ChatRecordedRequest): { status: number; message: string } | null => {
    if (rec.method !== 'POST' || rec.path !== '/v1/chat/completions')
      return { status: 404, message: `${rec.method} ${rec.path}: not found` };
    if (rec.body === undefined) return { status: 400, message: 'request body is not valid JSON' };
    const problem = (opts.validate ?? true) ? validateChatRequest(rec.body) : null;
    if (problem) return { status: 400, message: problem };
    if (opts.toolCalling === false && rec.body.tools?.length)
      return { status: 400, message: `registry.test/library/${rec.body.model} does not support tools` };
    return null;
  };

  const core = await startRecordingServer<ChatRecordedRequest, ChatReply>({
    name: 'chat server',
    requestIdHeader: 'x-request-id',
    apiKeyOf: (h) => /^Bearer (.+)$/i.exec(h.authorization ?? '')?.[1] ?? null,
    problemOf,
    errorBody: (status, message) => chatError(status, message).body,
    handle: (rec) => handler(rec.body, rec.index, rec),
    stalledBody: (rec) =>
      rec.body?.stream === true
        ? {
            body: sseFrame('', { ...chunkHead(rec.body), choices: [choiceDelta({ role: 'assistant' })] }),
            contentType: 'text/event-stream',
          }
        : {
            body: '{"id": "chatcmpl-stalled", "object": "chat.completion", "choices": [',
            contentType: 'application/json',
          },
    reply: (rec, out) => {
      const body = completionOf(rec.body, out);
      const sse = rec.body.stream === true ? chunksOf(body, rec.body, out.stream) : undefined;
      return { kind: 'completion', body, sse };
    },
  });
  const baseURL = `http://127.0.0.1:${core.port}/v1`;
  return {
    baseURL,
    port: core.port,
    requests: core.requests,
    completions: () => core.requests.filter((r) => r.response?.kind === 'completion'),
    setHandler(h) {
      handler = h;
    },
    providerConfig(extra = {}) {
      return { type: 'openai', baseURL, apiKeyEnv: KEY_VARIABLE, ...extra };
    },
    env(extra = {}) {
      return { [KEY_VARIABLE]: FAKE_OPENAI_KEY, ...extra };
    },
    waitForRequests: core.waitForRequests,
    close: core.close,
  };
}

// ---- conversations ---------------------------------------------------------------------

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The assistant message an agent sends back for a completion it got (blank text dropped). */
function sentBack(completion: Record<string, unknown>): { message: ChatMessage; callIds: string[]; final: boolean } {
  const choice = (completion.choices as { message: ChatMessage; finish_reason: string }[])[0]!;
  const calls = choice.message.tool_calls ?? [];
  const final = calls.length === 0 || choice.finish_reason === 'length';
  const text =
    typeof choice.message.content === 'string' && choice.message.content.trim() ? choice.message.content : '';
  const message: ChatMessage = { role: 'assistant', content: text || null, ...(final ? {} : { tool_calls: calls }) };
  return { message, callIds: final ? [] : calls.map((c) => c.id), final };
}

/** Does `r` extend `tail` by exactly tail's answer and the user turn after it? */
function extendsThread(tail: ChatRecordedRequest, r: ChatRecordedRequest): boolean {
  const prev = tail.body.messages;
  const msgs = r.body.messages;
  if (!same(tail.body.tools, r.body.tools) || !same(prev, msgs.slice(0, prev.length))) return false;
  const rest = msgs.slice(prev.length);
  if (tail.response?.kind !== 'completion') return rest.length === 0; // the same turn again after a fault
  const back = sentBack(tail.response.body as Record<string, unknown>);
  const kept = back.message.content !== null || back.message.tool_calls?.length;
  const turn = kept ? (same(rest[0], back.message) ? rest.slice(1) : null) : rest;
  if (!turn?.length) return false;
  if (back.final) return turn.length === 1 && turn[0]!.role === 'user';
  const tools = turn.filter((m) => m.role === 'tool');
  return (
    same(
      tools.map((m) => m.tool_call_id),
      back.callIds,
    ) && turn.length === tools.length
  );
}

/**
 * Links requests into conversations: a request whose messages are a system message and one
 * user message starts one; any other must extend exactly one earlier request of the same
 * tools: its messages, its own answer as the assistant turn, then the `tool` messages for
 * exactly its calls (or one user message, a reminder, after a final answer). A request that
 * re-sends a failed request's messages (a retry) continues that request's conversation.
 */
export function linkChatThreads(reqs: ChatRecordedRequest[]): {
  threads: ChatRecordedRequest[][];
  problems: { req: ChatRecordedRequest; problem: string }[];
} {
  const threads: ChatRecordedRequest[][] = [];
  const problems: { req: ChatRecordedRequest; problem: string }[] = [];
  const tails = new Map<ChatRecordedRequest, ChatRecordedRequest[]>();
  for (const r of reqs) {
    if (!r.body || !Array.isArray(r.body.messages)) continue;
    const m = r.body.messages;
    const candidates = [...tails.keys()].filter((tail) => extendsThread(tail, r));
    if (candidates.length === 0 && m.length === 2 && m[0]!.role === 'system' && m[1]!.role === 'user') {
      const t = [r];
      threads.push(t);
      tails.set(r, t);
      continue;
    }
    if (candidates.length !== 1) {
      const problem = candidates.length
        ? `extends ${candidates.length} earlier requests`
        : 'extends no earlier request';
      problems.push({ req: r, problem });
      continue;
    }
    const t = tails.get(candidates[0]!)!;
    tails.delete(candidates[0]!);
    t.push(r);
    tails.set(r, t);
  }
  return { threads, problems };
}
