// deepq's model port (Messages-API shaped) to OpenAI Chat Completions and back.
//  - the system prompt becomes the first message (role `system`); prompt-cache marks are dropped;
//  - a user turn's tool_result blocks become `tool` messages (they must follow the assistant
//    message that made the calls), its text one `user` message after them;
//  - an assistant turn becomes one message: its text as content, its tool_use blocks as
//    `tool_calls` (arguments are a JSON string on this API);
//  - tools become `function` tools with the same JSON Schema;
//  - the answer's finish_reason becomes a stop_reason, its usage deepq's four kinds.
import { randomUUID } from 'node:crypto';
import type OpenAI from 'openai';
import {
  type ContentBlock,
  estimatedUsage,
  type Message,
  ModelCallError,
  type ModelRequest,
  type ModelResponse,
  type ModelUsage,
  reportedUsage,
  type TextBlock,
  type ToolResultBlock,
  type ToolUseBlock,
} from './types.ts';

type ChatParams = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

export type MaxTokensParam = 'max_tokens' | 'max_completion_tokens';

export function toChatRequest(req: ModelRequest, maxTokensParam: MaxTokensParam): ChatParams {
  const system = typeof req.system === 'string' ? req.system : req.system.map((b) => b.text).join('\n\n');
  const messages: ChatMessage[] = [{ role: 'system', content: system }, ...req.messages.flatMap(toChatMessages)];
  const tools = req.tools?.map((t) => ({
    type: 'function' as const,
    function: { name: t.name, description: t.description, parameters: t.input_schema },
  }));
  return {
    model: req.model,
    messages,
    ...(tools?.length ? { tools } : {}),
    [maxTokensParam]: req.max_tokens,
    ...(req.effort ? { reasoning_effort: req.effort } : {}),
  };
}

function toChatMessages(m: Message): ChatMessage[] {
  if (typeof m.content === 'string') return [{ role: m.role, content: m.content }];
  const text = m.content
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('');
  if (m.role === 'user') {
    const results = m.content.filter((b): b is ToolResultBlock => b.type === 'tool_result');
    const out: ChatMessage[] = results.map((r) => ({
      role: 'tool',
      tool_call_id: r.tool_use_id,
      content: resultText(r),
    }));
    if (text) out.push({ role: 'user', content: text });
    return out;
  }
  const uses = m.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
  const toolCalls = uses.map((u) => ({
    id: u.id,
    type: 'function' as const,
    function: { name: u.name, arguments: typeof u.input === 'string' ? u.input : JSON.stringify(u.input ?? {}) },
  }));
  return [{ role: 'assistant', content: text || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }];
}

/** This API has no is_error flag: an error result says so in its text. */
function resultText(r: ToolResultBlock): string {
  return r.is_error && !/^error\b/i.test(r.content) ? `error: ${r.content}` : r.content;
}

/** The parts of a chat completion deepq reads; anything may be missing on a lax server. */
interface WireCompletion {
  model?: unknown;
  choices?: {
    finish_reason?: unknown;
    message?: { content?: unknown; tool_calls?: WireToolCall[]; refusal?: unknown };
  }[];
  usage?: {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    prompt_tokens_details?: { cached_tokens?: unknown } | null;
  } | null;
}
interface WireToolCall {
  id?: unknown;
  type?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}

export function fromChatCompletion(body: unknown, req: ModelRequest): ModelResponse {
  const c = body as WireCompletion;
  const message = typeof body === 'object' && body !== null ? c.choices?.[0]?.message : undefined;
  if (!message || typeof message !== 'object')
    throw new ModelCallError('provider returned a body without choices[0].message', 'malformed');
  const content: ContentBlock[] = [];
  const text = messageText(message.content);
  if (text !== '') content.push({ type: 'text', text });
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) content.push(toToolUse(call));
  const calls = content.some((b) => b.type === 'tool_use');
  // A refusal comes in its own field, the content null: the run reports it, not an empty answer.
  const refusal = !calls && typeof message.refusal === 'string' && message.refusal.trim() ? message.refusal : '';
  if (refusal && text === '') content.push({ type: 'text', text: refusal });
  return {
    model: typeof c.model === 'string' && c.model ? c.model : req.model,
    content,
    stop_reason: refusal ? 'refusal' : stopReason(c.choices![0]!.finish_reason, calls),
    usage: usageOf(c.usage) ?? estimatedUsage(req, content),
  };
}

/**
 * The message's text: a string (the OpenAI API), or an array of content parts, as some
 * compatible servers answer; their text parts joined (other parts, e.g. a refusal, carry none).
 */
function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts = content.map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : ''));
  return texts.join('');
}

function toToolUse(call: WireToolCall): ToolUseBlock {
  const fn = call.function;
  if (typeof fn?.name !== 'string' || !fn.name)
    throw new ModelCallError('provider returned a tool call without a function name', 'malformed');
  const id = typeof call.id === 'string' && call.id ? call.id : `call_${randomUUID().replaceAll('-', '')}`;
  return { type: 'tool_use', id, name: fn.name, input: parseArguments(fn.arguments) };
}

/**
 * The arguments as an object. Text that is not JSON stays a string: the tool's schema check
 * refuses it and the model reads why (and the string goes back to the API as it came).
 */
function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string') return args ?? {};
  if (args.trim() === '') return {};
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/** Some servers say `stop` even when the turn ends in tool calls: the calls decide. */
function stopReason(finish: unknown, calls: boolean): string {
  if (finish === 'length') return 'max_tokens';
  if (calls) return 'tool_use';
  if (finish === 'content_filter') return 'refusal';
  if (finish === 'stop' || finish === null || finish === undefined || finish === 'tool_calls') return 'end_turn';
  return String(finish);
}

/** prompt_tokens include the cached ones; deepq's input excludes them, as the Messages API does. */
function usageOf(u: WireCompletion['usage']): ModelUsage | undefined {
  const usage = reportedUsage({
    input_tokens: u?.prompt_tokens,
    output_tokens: u?.completion_tokens,
    cache_read_input_tokens: u?.prompt_tokens_details?.cached_tokens,
  });
  if (!usage) return undefined;
  const cached = Math.min(usage.input_tokens, usage.cache_read_input_tokens ?? 0);
  return { ...usage, input_tokens: usage.input_tokens - cached, cache_read_input_tokens: cached };
}
