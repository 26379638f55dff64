// A local HTTP server that speaks the Anthropic Messages API (`POST /v1/messages`), for
// testing the real @anthropic-ai/sdk (never a stub of it). It records every request
// (headers and parsed body) and lets the test decide each response: a message, an HTTP
// fault (429 with retry-after, 500, a malformed body), a connection reset, or a hang.
//
// Child processes use it with DEEPQ_MODEL_PROVIDER=anthropic,
// ANTHROPIC_BASE_URL=<server.url> and a fake ANTHROPIC_API_KEY.
//
// Like the real API it rejects (400) requests it would reject: empty text blocks, a
// tool_result without its tool_use, a tool_use without its tool_result, more than 4
// cache_control breakpoints, a conversation that does not start with a user message.
// An async handler holds its response for as long as it awaits; `abortedAt` records a client
// that closed the connection meanwhile (an aborted call, as the model endpoint sees it).
// A request with `stream: true` gets its answer as the API streams it (server-sent events:
// message_start, a ping, each block's start, deltas and stop, message_delta, message_stop), paced
// and broken as the reply's `stream` says.
import { createHash } from 'node:crypto';
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

export interface WireTextBlock {
  type: 'text';
  text: string;
  cache_control?: unknown;
}
export interface WireToolUse {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export interface WireToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: unknown;
  is_error?: boolean;
}
export interface WireThinking {
  type: 'thinking';
  thinking: string;
  signature: string;
}
export type WireBlock = WireTextBlock | WireToolUse | WireToolResult | { type: string; [k: string]: unknown };
/** A tool call in an answer; `inputJson`, when set, is streamed as its input verbatim (an input
 *  JSON.stringify cannot make, such as one nested thousands of levels deep). */
export type AnswerToolUse = WireToolUse & { inputJson?: string };
type AnswerBlock = WireTextBlock | AnswerToolUse | WireThinking;
export interface WireMessage {
  role: 'user' | 'assistant';
  content: string | WireBlock[];
}
export interface WireTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
  cache_control?: unknown;
}

/** The parsed request body of `POST /v1/messages`. */
export interface MessagesBody {
  model: string;
  max_tokens: number;
  system?: string | WireTextBlock[];
  messages: WireMessage[];
  tools?: WireTool[];
  stream?: boolean;
  thinking?: unknown;
  [k: string]: unknown;
}

export interface WireUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/**
 * How a streamed answer goes out: `delayMs` between events, `chunk` characters per delta; it
 * stalls (sends nothing more, the connection open) after `stallAfter` events, ends cut short after
 * `endAfter`, or sends an `error` event (`overloaded_error`, say) after `errorAfter` and ends.
 * Ignored for a request that did not ask for a stream.
 */
export interface StreamPacing {
  delayMs?: number;
  chunk?: number;
  stallAfter?: number;
  endAfter?: number;
  errorAfter?: number;
  error?: { type: string; message: string };
}

/** What a handler returns for a normal answer; missing fields are filled in. */
export interface MessageReply {
  content: AnswerBlock[];
  stop_reason?: string;
  model?: string;
  usage?: Partial<WireUsage>;
  id?: string;
  stream?: StreamPacing;
}

export type { RawReply };

/**
 * 'reset' destroys the connection; 'hang' never answers; 'stall' sends the headers (200)
 * and part of the body, then never finishes it.
 */
export type HandlerResult = MessageReply | RawReply | Held;
export type Handler = (
  body: MessagesBody,
  reqIndex: number,
  req: RecordedRequest,
) => HandlerResult | Promise<HandlerResult>;

/** A request as received; `apiKey` is `x-api-key`, or the token of `authorization: Bearer`. */
export interface RecordedRequest extends RecordedHttpRequest<MessagesBody> {
  /** What the server answered (for a message reply: the full message object). */
  response?: { kind: 'message' | 'raw' | Held | 'rejected'; status?: number; body?: unknown };
}

export interface MessagesApiServer {
  /** `http://127.0.0.1:<port>`: the ANTHROPIC_BASE_URL. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Requests whose body went to the handler (not rejected by validation). */
  messageRequests(): RecordedRequest[];
  setHandler(handler: Handler): void;
  /** Forget recorded requests (the index keeps counting up). */
  clear(): void;
  /** Environment for a child process that must use this server. */
  env(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  /** Resolves when `n` requests have been recorded in total. */
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const FAKE_API_KEY = 'sk-ant-test-fake-0123456789abcdef';

// ---- building replies ------------------------------------------------------------------

export function text(t: string, extra: Omit<MessageReply, 'content'> = {}): MessageReply {
  return { content: [{ type: 'text', text: t }], ...extra };
}

let toolUseSeq = 0;
export function toolUse(name: string, input: unknown, opts: { id?: string; text?: string } = {}): MessageReply {
  const id = opts.id ?? `toolu_${Date.now().toString(36)}_${++toolUseSeq}`;
  return {
    content: [
      ...(opts.text ? [{ type: 'text' as const, text: opts.text }] : []),
      { type: 'tool_use', id, name, input },
    ],
    stop_reason: 'tool_use',
  };
}

/** The server's signature of a thinking text: a block passed back changed no longer matches it. */
export const thinkingSignature = (text: string) =>
  `sig_${createHash('sha256').update(`messages-api-server:${text}`).digest('base64')}`;

/** A thinking block as the API would send it, signed (a handler's model that thinks unasked). */
export function thinkingBlock(text: string): WireThinking {
  return { type: 'thinking', thinking: text, signature: thinkingSignature(text) };
}

/** Whether the request asks for thinking (enabled or adaptive). */
export const thinkingOn = (body: { thinking?: unknown }) =>
  ['enabled', 'adaptive'].includes((body.thinking as { type?: string } | undefined)?.type ?? '');

export function apiError(status: number, message: string, headers: Record<string, string> = {}): RawReply {
  const type =
    status === 429
      ? 'rate_limit_error'
      : status === 529
        ? 'overloaded_error'
        : status >= 500
          ? 'api_error'
          : status === 401
            ? 'authentication_error'
            : status === 404
              ? 'not_found_error'
              : 'invalid_request_error';
  return { status, headers, body: { type: 'error', error: { type, message } } };
}

// ---- reading requests ------------------------------------------------------------------

/** The system prompt as one string (string or text blocks). */
export function systemText(body: Pick<MessagesBody, 'system'>): string {
  const s = body.system;
  if (s === undefined) return '';
  if (typeof s === 'string') return s;
  return s.map((b) => (b.type === 'text' ? b.text : '')).join('');
}

export function blockText(content: string | WireBlock[]): string {
  if (typeof content === 'string') return content;
  return content.map((b) => (b.type === 'text' ? (b as WireTextBlock).text : '')).join('');
}

/** The text of the first (task) message. */
export function firstUserText(body: Pick<MessagesBody, 'messages'>): string {
  const m = body.messages[0];
  return m ? blockText(m.content) : '';
}

export type DeepqRole = 'planner' | 'reflector' | 'research' | 'code' | 'critic' | 'unknown';

/** Which deepq agent sent the request, from its system prompt (the default role prompts). */
export function roleOf(body: Pick<MessagesBody, 'system'>): DeepqRole {
  const s = systemText(body);
  if (s.startsWith('You are the planner')) return 'planner';
  if (s.startsWith('You are the reflection node')) return 'reflector';
  if (s.startsWith('You are a research specialist')) return 'research';
  if (s.startsWith('You are a code writer')) return 'code';
  if (s.startsWith('You are a critic')) return 'critic';
  return 'unknown';
}

/** The role names the planner prompt offers ("available roles: a, b, c."). */
export function plannerRoles(body: Pick<MessagesBody, 'system'>): string[] {
  const m = /available roles: ([^\n]*)\.\n/.exec(systemText(body));
  return m
    ? m[1]!
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : [];
}

/** The goal text of a planner or reflector request ("Goal: ..." line of the task). */
export function goalOf(body: Pick<MessagesBody, 'messages'>): string {
  return /^Goal: (.*)$/m.exec(firstUserText(body))?.[1] ?? '';
}

function toolResultsOf(m: WireMessage | undefined): WireToolResult[] {
  if (!m || typeof m.content === 'string') return [];
  return m.content.filter((b): b is WireToolResult => b.type === 'tool_result');
}

function toolUsesOf(m: WireMessage | undefined): WireToolUse[] {
  if (!m || typeof m.content === 'string') return [];
  return m.content.filter((b): b is WireToolUse => b.type === 'tool_use');
}

/** The API's error for an empty message (only a final assistant message, a prefill, may be empty). */
const emptyMessageError = (i: number) =>
  `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;

/** The path of the first string in `v` holding a lone surrogate, or null: the real API refuses
 *  one anywhere in the body (half an emoji, cut or quoted). */
function illFormedAt(v: unknown, path: string): string | null {
  if (typeof v === 'string') return v.isWellFormed() ? null : path;
  if (typeof v !== 'object' || v === null) return null;
  for (const [k, x] of Object.entries(v)) {
    const at = illFormedAt(x, path ? `${path}.${k}` : k);
    if (at !== null) return at;
  }
  return null;
}

/** The request's validation problem, as the real API would report it, or null. */
export function validateRequest(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'request body must be a JSON object';
  const broken = illFormedAt(body, '');
  if (broken !== null) return `The request body is not valid JSON: no low surrogate in string (at ${broken || 'root'})`;
  const b = body as MessagesBody;
  if (typeof b.model !== 'string' || !b.model) return 'model: Field required';
  if (!Number.isInteger(b.max_tokens) || b.max_tokens < 1) return 'max_tokens: must be a positive integer';
  if (b.stream !== undefined && typeof b.stream !== 'boolean') return 'stream: Input should be a valid boolean';
  if (b.system !== undefined && typeof b.system !== 'string') {
    if (!Array.isArray(b.system)) return 'system: must be a string or an array of text blocks';
    for (const [i, blk] of b.system.entries()) {
      if (blk?.type !== 'text') return `system.${i}: only text blocks are allowed`;
      if (typeof blk.text !== 'string' || !blk.text.trim())
        return `system.${i}.text: text content blocks must contain non-whitespace text`;
    }
  }
  if (!Array.isArray(b.messages) || b.messages.length === 0) return 'messages: at least one message is required';
  if (b.messages[0]!.role !== 'user') return 'messages: first message must use the "user" role';
  for (const [i, m] of b.messages.entries()) {
    if (m.role !== 'user' && m.role !== 'assistant') return `messages.${i}.role: must be "user" or "assistant"`;
    const last = i === b.messages.length - 1;
    if (typeof m.content === 'string') {
      if (!m.content.trim() && !(last && m.role === 'assistant')) return emptyMessageError(i);
      continue;
    }
    if (!Array.isArray(m.content)) return `messages.${i}.content: must be a string or an array`;
    if (m.content.length === 0 && !(last && m.role === 'assistant')) return emptyMessageError(i);
    for (const [j, blk] of m.content.entries()) {
      if (
        blk.type === 'text' &&
        (typeof (blk as WireTextBlock).text !== 'string' || !(blk as WireTextBlock).text.trim())
      )
        return `messages.${i}.content.${j}.text: text content blocks must contain non-whitespace text`;
      if (blk.type === 'tool_use' && m.role !== 'assistant')
        return `messages.${i}.content.${j}: tool_use blocks are only allowed in assistant messages`;
      if (blk.type === 'tool_result' && m.role !== 'user')
        return `messages.${i}.content.${j}: tool_result blocks are only allowed in user messages`;
    }
    if (m.role === 'user') {
      const results = toolResultsOf(m);
      if (results.length) {
        const prev = new Set(toolUsesOf(b.messages[i - 1]).map((u) => u.id));
        for (const r of results) {
          if (!prev.has(r.tool_use_id))
            return (
              `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${r.tool_use_id}. ` +
              'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.'
            );
        }
      }
    } else {
      const uses = toolUsesOf(m);
      if (uses.length && !last) {
        const answered = new Set(toolResultsOf(b.messages[i + 1]).map((r) => r.tool_use_id));
        const missing = uses.filter((u) => !answered.has(u.id)).map((u) => u.id);
        if (missing.length)
          return (
            `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ` +
            `${missing.join(', ')}. ` +
            'Each `tool_use` block must have a corresponding `tool_result` block in the next message.'
          );
      }
    }
  }
  const tools = toolsProblem(b.tools);
  if (tools) return tools;
  const thinking = thinkingParamProblem(b) ?? thinkingHistoryProblem(b) ?? outputConfigProblem(b);
  if (thinking) return thinking;
  const breakpoints = (JSON.stringify(b).match(/"cache_control":/g) ?? []).length;
  if (breakpoints > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`;
  return null;
}

/** The tool list's problem, as the API words it, or null. */
function toolsProblem(tools: MessagesBody['tools']): string | null {
  if (tools === undefined) return null;
  if (!Array.isArray(tools)) return 'tools: must be an array';
  for (const [i, t] of tools.entries()) {
    if (typeof t.name !== 'string' || !/^[a-zA-Z0-9_-]{1,128}$/.test(t.name))
      return `tools.${i}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
    if (t.input_schema?.type !== 'object') return `tools.${i}.input_schema.type: Input should be 'object'`;
  }
  return null;
}

/** The `output_config` parameter's problem (its effort), as the API words it, or null. */
function outputConfigProblem(b: MessagesBody): string | null {
  if (b.output_config === undefined) return null;
  const effort = (b.output_config as { effort?: unknown } | null)?.effort;
  if (effort !== undefined && effort !== null && !['low', 'medium', 'high', 'xhigh', 'max'].includes(String(effort)))
    return "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'";
  return null;
}

/** The `thinking` parameter's problem, as the API words it, or null. */
function thinkingParamProblem(b: MessagesBody): string | null {
  if (b.thinking === undefined) return null;
  const t = b.thinking as { type?: unknown; budget_tokens?: unknown };
  if (!['enabled', 'adaptive', 'disabled'].includes(String(t?.type)))
    return "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'";
  if (t.type !== 'enabled') return null;
  if (!Number.isInteger(t.budget_tokens) || (t.budget_tokens as number) < 1024)
    return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
  if ((t.budget_tokens as number) >= b.max_tokens) return '`max_tokens` must be greater than `thinking.budget_tokens`';
  return null;
}

/**
 * Thinking blocks sent back must be as the API sent them (their signature checks), never marked
 * for caching; with thinking on, a last assistant turn that called tools starts with its thinking.
 */
function thinkingHistoryProblem(b: MessagesBody): string | null {
  for (const [i, m] of b.messages.entries()) {
    if (typeof m.content === 'string') continue;
    for (const [j, blk] of m.content.entries()) {
      if (blk.type !== 'thinking') continue;
      const t = blk as unknown as WireThinking & { cache_control?: unknown };
      const at = `messages.${i}.content.${j}`;
      if (t.cache_control) return `${at}.thinking.cache_control: cache_control cannot be set for thinking blocks`;
      if (typeof t.thinking !== 'string' || t.signature !== thinkingSignature(t.thinking))
        return `${at}: Invalid \`signature\` in \`thinking\` block`;
    }
  }
  if (!thinkingOn(b)) return null;
  const lastAssistant = b.messages.map((m) => m.role).lastIndexOf('assistant');
  const turn = b.messages[lastAssistant];
  if (!turn || typeof turn.content === 'string' || !turn.content.some((x) => x.type === 'tool_use')) return null;
  const first = turn.content[0]!.type;
  if (first === 'thinking' || first === 'redacted_thinking') return null;
  return (
    `messages.${lastAssistant}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, ` +
    `but found \`${first}\`. When \`thinking\` is enabled, a final \`assistant\` message must start ` +
    'with a thinking block.'
  );
}

// ---- usage -----------------------------------------------------------------------------

/** Rough token counts (chars / 4), with prompt caching simulated per system prompt. */
export function estimateUsage(body: MessagesBody, content: unknown, seenCachedSystems: Set<string>): WireUsage {
  const sys = systemText(body);
  const cached = Array.isArray(body.system) && body.system.some((b) => b.cache_control);
  const sysTokens = Math.ceil(sys.length / 4);
  const restTokens = Math.ceil((JSON.stringify(body.messages).length + JSON.stringify(body.tools ?? []).length) / 4);
  const out = Math.max(1, Math.ceil(JSON.stringify(content).length / 4));
  if (!cached)
    return {
      input_tokens: sysTokens + restTokens,
      output_tokens: out,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    };
  if (seenCachedSystems.has(sys))
    return {
      input_tokens: restTokens,
      output_tokens: out,
      cache_read_input_tokens: sysTokens,
      cache_creation_input_tokens: 0,
    };
  seenCachedSystems.add(sys);
  return {
    input_tokens: restTokens,
    output_tokens: out,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: sysTokens,
  };
}

// ---- the default model -----------------------------------------------------------------

export const DEFAULT_ROLE_NAMES = { research: 'research-specialist', code: 'code-writer', critic: 'critic' };

/** Live file names from a "Current files:" index (`- name [status, N bytes]`). */
export function liveFiles(task: string): string[] {
  return [...task.matchAll(/^- (\S+) \[(active|done|failed),/gm)].map((m) => m[1]!);
}

/** Done file names from the index: finished work, which the plan contract keeps. */
export function doneFiles(task: string): string[] {
  return [...task.matchAll(/^- (\S+) \[done,/gm)].map((m) => m[1]!);
}

/** The artifacts the reflection asked to revise (the planner's "To revise" line). */
export function reviseFiles(task: string): string[] {
  const line = /^To revise[^:]*: (.*)$/m.exec(task)?.[1] ?? '';
  return line ? line.split(', ').map((s) => s.trim()) : [];
}

function pickRole(roles: string[], kind: keyof typeof DEFAULT_ROLE_NAMES): string | undefined {
  if (!roles.length) return DEFAULT_ROLE_NAMES[kind];
  const want = { research: /research/, code: /code|writer/, critic: /critic|review/ }[kind];
  return roles.find((r) => want.test(r));
}

/**
 * Like the scripted provider: cycle 1 research + code, cycle 2 a critique, then end; only
 * what is not done yet is planned (finished work is kept, as the plan contract asks).
 */
export function defaultPlan(body: MessagesBody): {
  subtasks: { role: string; instruction: string; expected_artifact: string; read_files: string[] }[];
} {
  const roles = plannerRoles(body);
  const task = firstUserText(body);
  const goal = goalOf(body).slice(0, 300) || 'the goal';
  const files = liveFiles(task);
  const done = new Set(doneFiles(task));
  const priorPlan = /^Prior plan: (.*)$/m.exec(task)?.[1] ?? '(none)';
  const research = pickRole(roles, 'research');
  const coder = pickRole(roles, 'code');
  const critic = pickRole(roles, 'critic');
  const subtasks: { role: string; instruction: string; expected_artifact: string; read_files: string[] }[] = [];
  if ((research && !done.has('research.md')) || (coder && !done.has('solution.py'))) {
    if (research && !done.has('research.md'))
      subtasks.push({
        role: research,
        instruction: `Research the background for: ${goal}`,
        expected_artifact: 'research.md',
        read_files: [],
      });
    if (coder && !done.has('solution.py'))
      subtasks.push({
        role: coder,
        instruction: `Write code for: ${goal}`,
        expected_artifact: 'solution.py',
        read_files: [],
      });
  } else if (critic && !priorPlan.includes(`"role":"${critic}"`) && !done.has('critique.json')) {
    subtasks.push({
      role: critic,
      instruction: `Review the code against the goal: ${goal}`,
      expected_artifact: 'critique.json',
      read_files: ['solution.py'],
    });
  } else if (coder && reviseFiles(task).includes('solution.py')) {
    const reads = ['solution.py', ...(files.includes('critique.json') ? ['critique.json'] : [])];
    subtasks.push({
      role: coder,
      instruction: `Revise the code for: ${goal}, addressing the critique`,
      expected_artifact: 'solution.py',
      read_files: reads,
    });
  }
  if (subtasks.length === 0)
    subtasks.push({
      role: roles[0] ?? DEFAULT_ROLE_NAMES.research,
      instruction: `Work on: ${goal}`,
      expected_artifact:
        ['notes.md', 'notes-2.md', 'notes-3.md', 'notes-4.md'].find((n) => !done.has(n)) ?? 'notes-5.md',
      read_files: [],
    });
  return { subtasks };
}

export function defaultReflection(body: MessagesBody): { decision: 'continue' | 'end'; reason: string } {
  const planLine = /^Plan: (.*)$/m.exec(firstUserText(body))?.[1] ?? '';
  const reviewed = /"role":"[^"]*(critic|review)[^"]*"/.test(planLine);
  return reviewed
    ? { decision: 'end', reason: 'the code was written and reviewed; the goal is met' }
    : { decision: 'continue', reason: 'the code exists but has not been reviewed yet' };
}

function taskTopic(task: string): string {
  return (/## Task\n([\s\S]*)$/.exec(task)?.[1] ?? task).trim().split('\n')[0]!.slice(0, 160);
}

export function defaultSummary(body: MessagesBody): string {
  return [
    `Summary: ${taskTopic(firstUserText(body))}`,
    '',
    '- Key fact 1 about the topic [1]',
    '- Key fact 2 about the topic [2]',
    '',
    '[1] source A',
    '[2] source B',
  ].join('\n');
}

export function defaultCode(body: MessagesBody): string {
  const topic = taskTopic(firstUserText(body))
    .replace(/[^\w .,-]/g, '')
    .slice(0, 120);
  return [
    '```python',
    `# ${topic}`,
    'def solve(values):',
    '    """Sorts the values."""',
    '    return sorted(values)',
    '',
    '',
    'if __name__ == "__main__":',
    '    print(solve([3, 1, 2]))',
    '```',
  ].join('\n');
}

export function defaultCritique(): string {
  return JSON.stringify([
    { line: 3, issue: 'no input validation for non-list values', severity: 'medium' },
    { line: 5, issue: 'missing tests for empty input', severity: 'low' },
  ]);
}

/** The contract-valid final answer for the request's role. */
export function defaultAnswer(body: MessagesBody): string {
  switch (roleOf(body)) {
    case 'planner':
      return JSON.stringify(defaultPlan(body));
    case 'reflector':
      return JSON.stringify(defaultReflection(body));
    case 'research':
      return defaultSummary(body);
    case 'code':
      return defaultCode(body);
    case 'critic':
      return defaultCritique();
    default:
      return 'OK';
  }
}

/**
 * A contract-valid model for every deepq role. On its first turn each subagent makes one
 * tool call (research and code-writer `list_files`, the critic `read_file` of the first
 * file it was given), so the tool loop runs over HTTP too; then it answers.
 */
export const defaultHandler: Handler = (body, reqIndex) => {
  const role = roleOf(body);
  const names = new Set((body.tools ?? []).map((t) => t.name));
  const firstTurn = body.messages.length === 1;
  if (firstTurn && (role === 'research' || role === 'code' || role === 'critic')) {
    const file = /^# (\S+)\n/m.exec(firstUserText(body))?.[1];
    if (role === 'critic' && file && names.has('read_file'))
      return toolUse('read_file', { name: file }, { id: `toolu_${reqIndex}_0` });
    if (names.has('list_files')) return toolUse('list_files', {}, { id: `toolu_${reqIndex}_0` });
  }
  return text(defaultAnswer(body));
};

// ---- streaming -------------------------------------------------------------------------

type WireMessageOut = {
  content: AnswerBlock[];
  stop_reason: string;
  usage: WireUsage;
  [k: string]: unknown;
};

/** One block's events: its start (empty), its deltas, its stop. */
function blockEvents(block: AnswerBlock, index: number, chunk: number): SseAnswer['events'] {
  if (block.type === 'thinking') return thinkingEvents(block, index, chunk);
  const isTool = block.type === 'tool_use';
  const { inputJson, ...use } = isTool ? block : { inputJson: undefined };
  const start = isTool ? { ...use, input: {} } : { type: 'text', text: '' };
  const deltas = isTool
    ? inPieces(inputJson ?? JSON.stringify(block.input ?? {}), chunk).map((p) => ({
        type: 'input_json_delta',
        partial_json: p,
      }))
    : inPieces(block.text, chunk).map((t) => ({ type: 'text_delta', text: t }));
  return [
    { event: 'content_block_start', data: { type: 'content_block_start', index, content_block: start } },
    ...deltas.map((delta) => ({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta } })),
    { event: 'content_block_stop', data: { type: 'content_block_stop', index } },
  ];
}

/** A thinking block as the API streams it: its text in thinking deltas, then its signature. */
function thinkingEvents(block: WireThinking, index: number, chunk: number): SseAnswer['events'] {
  const delta = (d: Record<string, unknown>) => ({
    event: 'content_block_delta',
    data: { type: 'content_block_delta', index, delta: d },
  });
  return [
    {
      event: 'content_block_start',
      data: { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } },
    },
    ...inPieces(block.thinking, chunk).map((t) => delta({ type: 'thinking_delta', thinking: t })),
    delta({ type: 'signature_delta', signature: block.signature }),
    { event: 'content_block_stop', data: { type: 'content_block_stop', index } },
  ];
}

/** The message as the API streams it, paced and broken as `pacing` says. */
export function streamOf(message: WireMessageOut, pacing: StreamPacing = {}): SseAnswer {
  const { output_tokens, ...inputUsage } = message.usage;
  const started = {
    ...message,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { ...inputUsage, output_tokens: 1 },
  };
  const events: SseAnswer['events'] = [
    { event: 'message_start', data: { type: 'message_start', message: started } },
    { event: 'ping', data: { type: 'ping' } },
    ...message.content.flatMap((b, i) => blockEvents(b, i, pacing.chunk ?? 40)),
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: message.stop_reason, stop_sequence: null },
        usage: { output_tokens },
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  ];
  if (pacing.errorAfter !== undefined) {
    const error = pacing.error ?? { type: 'overloaded_error', message: 'Overloaded' };
    events.splice(pacing.errorAfter, events.length, { event: 'error', data: { type: 'error', error } });
  }
  return { events, delayMs: pacing.delayMs, stallAfter: pacing.stallAfter, endAfter: pacing.endAfter };
}

/** What a streamed request's stall sends before it stalls: the headers and message_start. */
const stalledStream = () =>
  sseFrame('message_start', {
    type: 'message_start',
    message: { id: 'msg_stalled', type: 'message', role: 'assistant', content: [], model: 'stalled', usage: {} },
  });

/** A model asked to think starts its answer with its thinking (unless the handler's reply has some). */
function withThinking(body: MessagesBody, content: AnswerBlock[]): AnswerBlock[] {
  if (!thinkingOn(body) || content.some((b) => b.type === 'thinking')) return content;
  const about = blockText(body.messages[body.messages.length - 1]?.content ?? '').slice(0, 60);
  return [thinkingBlock(`Considering: ${about}`), ...content];
}

// ---- the server ------------------------------------------------------------------------

export async function startMessagesApiServer(
  opts: { handler?: Handler; validate?: boolean } = {},
): Promise<MessagesApiServer> {
  let handler: Handler = opts.handler ?? defaultHandler;
  const validate = opts.validate ?? true;
  const cachedSystems = new Set<string>();
  let msgSeq = 0;

  /** The request's problem as the real API would answer it, or null. */
  const problemOf = (rec: RecordedRequest): { status: number; message: string } | null => {
    if (rec.method !== 'POST' || rec.path !== '/v1/messages')
      return { status: 404, message: `${rec.method} ${rec.path}: not found` };
    if (rec.body === undefined) return { status: 400, message: 'request body is not valid JSON' };
    const problem = validate ? validateRequest(rec.body) : null;
    return problem ? { status: 400, message: problem } : null;
  };

  const messageOf = (body: MessagesBody, out: MessageReply) => ({
    id: out.id ?? `msg_test_${++msgSeq}`,
    type: 'message',
    role: 'assistant',
    model: out.model ?? body.model,
    content: withThinking(body, out.content),
    stop_reason: out.stop_reason ?? (out.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    usage: { ...estimateUsage(body, out.content, cachedSystems), ...out.usage },
  });

  const core = await startRecordingServer<RecordedRequest, MessageReply>({
    name: 'messages-api-server',
    requestIdHeader: 'request-id',
    apiKeyOf: (h) => h['x-api-key'] || (/^Bearer (.+)$/i.exec(h.authorization ?? '')?.[1] ?? null),
    problemOf,
    errorBody: (status, message) => apiError(status, message).body,
    handle: (rec) => handler(rec.body, rec.index, rec),
    stalledBody: (rec) =>
      rec.body?.stream === true
        ? { body: stalledStream(), contentType: 'text/event-stream' }
        : {
            body: '{"id": "msg_stalled", "type": "message", "role": "assistant", "content": [',
            contentType: 'application/json',
          },
    reply: (rec, out) => {
      const body = messageOf(rec.body, out);
      return { kind: 'message', body, sse: rec.body.stream === true ? streamOf(body, out.stream) : undefined };
    },
  });
  const url = `http://127.0.0.1:${core.port}`;
  return {
    url,
    port: core.port,
    requests: core.requests,
    messageRequests: () => core.requests.filter((r) => r.response && r.response.kind !== 'rejected'),
    setHandler(h) {
      handler = h;
    },
    clear() {
      core.requests.length = 0;
    },
    env(extra = {}) {
      return { DEEPQ_MODEL_PROVIDER: 'anthropic', ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: FAKE_API_KEY, ...extra };
    },
    waitForRequests: core.waitForRequests,
    close: core.close,
  };
}

// ---- conversations ---------------------------------------------------------------------

export interface ThreadLinks {
  /** Each conversation: its requests in order, each extending the one before. */
  threads: RecordedRequest[][];
  /** Requests that neither start a conversation nor extend exactly one earlier request. */
  problems: { req: RecordedRequest; problem: string }[];
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Messages as the agent keeps them in its history: the prompt-cache middleware marks copies
 * of the latest turn (cache_control on its last block, a string made a text block), so the
 * same turn is sent marked once and unmarked after. Compare conversations through this.
 */
export function unmarkedMessages(messages: WireMessage[]): WireMessage[] {
  return messages.map((m) => {
    if (typeof m.content === 'string' || !m.content.some((b) => 'cache_control' in b)) return m;
    const [only] = m.content;
    if (m.content.length === 1 && only!.type === 'text') return { role: m.role, content: (only as WireTextBlock).text };
    const content = m.content.map((b) => {
      const { cache_control: _c, ...rest } = b as WireBlock & { cache_control?: unknown };
      return rest as WireBlock;
    });
    return { role: m.role, content };
  });
}

/** The assistant turn an agent keeps in its history from a response (blank text dropped). */
function keptAssistantContent(content: WireBlock[], final: boolean): WireBlock[] {
  return content.filter((b) =>
    b.type === 'text' ? (b as WireTextBlock).text.trim() !== '' : !(final && b.type === 'tool_use'),
  );
}

/**
 * Links requests into conversations: a request with one message starts one; any other must
 * extend exactly one earlier request R of the same system prompt and tools: R's messages,
 * then R's own answer (as the assistant turn), then one user turn that holds the results of
 * exactly R's tool calls, or a reminder when R's answer was final. A request that re-sends
 * R's messages after R failed (a retry) continues R's conversation.
 */
export function linkThreads(reqs: RecordedRequest[]): ThreadLinks {
  const threads: RecordedRequest[][] = [];
  const problems: ThreadLinks['problems'] = [];
  const tails = new Map<RecordedRequest, RecordedRequest[]>();
  for (const r of reqs) {
    if (!r.body || !Array.isArray(r.body.messages)) continue;
    const msgs = unmarkedMessages(r.body.messages);
    if (msgs.length === 1) {
      const t = [r];
      threads.push(t);
      tails.set(r, t);
      continue;
    }
    const candidates: RecordedRequest[] = [];
    for (const [tail] of tails) {
      if (!same(tail.body.system, r.body.system) || !same(tail.body.tools, r.body.tools)) continue;
      const prev = unmarkedMessages(tail.body.messages);
      if (!same(prev, msgs.slice(0, prev.length))) continue;
      const rest = msgs.slice(prev.length);
      if (tail.response?.kind !== 'message') {
        if (rest.length === 0) candidates.push(tail); // the same turn again after a fault
        continue;
      }
      const answer = tail.response.body as { content: WireBlock[]; stop_reason: string };
      const uses = answer.content.filter((b): b is WireToolUse => b.type === 'tool_use');
      const final = answer.stop_reason !== 'tool_use' || uses.length === 0;
      const kept = keptAssistantContent(answer.content, final);
      const userTurn = kept.length
        ? rest.length === 2 && rest[0]!.role === 'assistant' && same(rest[0]!.content, kept)
          ? rest[1]
          : undefined
        : rest.length === 1
          ? rest[0]
          : undefined;
      if (userTurn?.role !== 'user') continue;
      if (final) {
        if (toolResultsOf(userTurn).length === 0) candidates.push(tail);
      } else if (
        same(
          toolResultsOf(userTurn).map((x) => x.tool_use_id),
          uses.map((u) => u.id),
        )
      ) {
        candidates.push(tail);
      }
    }
    if (candidates.length !== 1) {
      problems.push({
        req: r,
        problem: candidates.length
          ? `extends ${candidates.length} earlier requests`
          : 'extends no earlier request of its own conversation',
      });
      continue;
    }
    const t = tails.get(candidates[0]!)!;
    tails.delete(candidates[0]!);
    t.push(r);
    tails.set(r, t);
  }
  return { threads, problems };
}
