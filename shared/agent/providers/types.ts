// The model port. Requests and responses follow the Anthropic Messages API shape, so the
// anthropic provider passes them through, the scripted one speaks the same language, and
// the openai provider maps them to Chat Completions and back (./openai-wire.ts).

export interface TextBlock {
  type: 'text';
  text: string;
  cache_control?: { type: 'ephemeral' };
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  is_error?: boolean;
}
/** A model's reasoning (extended thinking): passed back unchanged, its signature included. */
export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}
/** Reasoning the provider encrypted: passed back unchanged. */
export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}
export type ContentBlock = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock;

export interface Message {
  role: 'user' | 'assistant';
  content: string | (ContentBlock | ToolResultBlock)[];
}

/** Extended thinking as the Messages API takes it (providers of type openai ignore it). */
export type ThinkingParam = { type: 'enabled'; budget_tokens: number } | { type: 'adaptive' } | { type: 'disabled' };

export interface ToolDef {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  cache_control?: { type: 'ephemeral' };
}

export interface ModelRequest {
  model: string;
  system: string | TextBlock[];
  messages: Message[];
  tools?: ToolDef[];
  max_tokens: number;
  thinking?: ThinkingParam;
  /** How much effort the model puts into the answer (roles.ts EFFORTS); unset: the model's default. */
  effort?: 'low' | 'medium' | 'high' | 'xhigh' | 'max';
}

export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  /** Set when the endpoint reported no usage and these counts are deepq's estimate. */
  estimated?: boolean;
}

export interface ModelResponse {
  model: string;
  content: ContentBlock[];
  stop_reason: string | null;
  usage: ModelUsage;
  /** Set by token accounting when the goal's budget granted fewer output tokens than asked. */
  grantedMaxTokens?: number;
  /** What attempts of this call that failed before it had used (retry.ts): booked with it. */
  spentBefore?: ModelUsage;
}

/** Two calls' usage together; an estimate if either was one. */
export function addUsage(a: ModelUsage | undefined, b: ModelUsage | undefined): ModelUsage | undefined {
  if (!a || !b) return a ?? b;
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cache_read_input_tokens: (a.cache_read_input_tokens ?? 0) + (b.cache_read_input_tokens ?? 0),
    cache_creation_input_tokens: (a.cache_creation_input_tokens ?? 0) + (b.cache_creation_input_tokens ?? 0),
    ...(a.estimated || b.estimated ? { estimated: true } : {}),
  };
}

/**
 * What a call works on, passed explicitly: a provider that answers without a model (the
 * scripted one) reads this, never the prompt text, so prompts can change freely.
 */
export interface CallSubject {
  /** The goal text. */
  goal: string;
  /** The planner: the prior plan (null on the first cycle). The reflector: this cycle's plan. */
  plan?: { subtasks: { role: string; expected_artifact: string }[] } | null;
  /** Names of the goal's live artifacts. */
  files?: string[];
  /** The planner: artifacts that are done (finished work), and those the reflection asked to revise. */
  done?: string[];
  /** The planner: the files the goal started with (`enqueue --file`). */
  inputs?: string[];
  revise?: string[];
  /** The planner: tokens left of the goal's budget, when it has one. */
  tokensLeft?: number;
  /** A subagent: its instruction. */
  instruction?: string;
}

/** Who is calling: middleware and metrics read it; it is never sent to the model. */
export interface CallContext {
  role: string;
  /** The agent kind: 'planner', 'reflector' or 'subagent'. */
  kind: 'planner' | 'reflector' | 'subagent';
  contract: string;
  tier: 'HIGH' | 'LOW';
  /** The agent's own model (`<provider>:<id>`), which overrides its tier's (tier routing reads it). */
  roleModel?: string;
  goalId?: string;
  step?: number;
  threadId?: string;
  signal?: AbortSignal;
  subject?: CallSubject;
  /** Called once when a streamed answer's first delta arrives, thinking included (time to first output). */
  onFirstOutput?: () => void;
}

export interface ModelProvider {
  readonly name: string;
  createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse>;
  /**
   * The metric labels of a call to `requested` (answered as `returned`): the provider that
   * serves it and the model as configured (see ./model-labels.ts). Without it: the provider's
   * name and the requested id.
   */
  metricLabels?(requested: string, returned?: string): MetricLabels;
}

export interface MetricLabels {
  provider: string;
  model: string;
}

/** A provider failure with what retry policy needs to know. */
export class ModelCallError extends Error {
  override name = 'ModelCallError';
  constructor(
    message: string,
    readonly kind: 'rate_limit' | 'server' | 'timeout' | 'connection' | 'client' | 'aborted' | 'malformed',
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
  get retryable(): boolean {
    return this.kind !== 'client' && this.kind !== 'aborted';
  }
  /**
   * What the endpoint had used of this call when it failed (a stream cut, stalled or cancelled
   * after it began), and of the attempts before it: billed, so booked all the same.
   */
  spent?: ModelUsage;
}

/** The usage a failed call (or the attempts before an error of another kind) leaves to book. */
export function spentBy(err: unknown): ModelUsage | undefined {
  return (err as { spent?: ModelUsage } | null)?.spent;
}

/** Fewest output tokens a call is worth making with (or all it asks for, when it asks for less). */
export const MIN_CALL_TOKENS = 128;

/** All of a response's tokens: input (cached or not) and output. */
export function usageTotal(u: ModelUsage | undefined): number {
  if (!u) return 0;
  return (
    (u.input_tokens ?? 0) +
    (u.output_tokens ?? 0) +
    (u.cache_read_input_tokens ?? 0) +
    (u.cache_creation_input_tokens ?? 0)
  );
}

/**
 * A request's input tokens, estimated as characters / 4 over the system text and the JSON
 * of its messages and tools. The real count differs by tokenizer; budgets only need it close.
 */
export function estimateInputTokens(req: Pick<ModelRequest, 'system' | 'messages' | 'tools'>): number {
  const system = typeof req.system === 'string' ? req.system : req.system.map((b) => b.text).join('');
  const rest = JSON.stringify(req.messages).length + JSON.stringify(req.tools ?? []).length;
  return Math.ceil(system.length / 4) + Math.ceil(rest / 4);
}

export function responseText(res: ModelResponse): string {
  return res.content
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('');
}

/** A count an endpoint reported, as a whole number of tokens ≥ 0, or undefined if it is no count at all. */
function tokenCount(n: unknown): number | undefined {
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : undefined;
}

/**
 * An endpoint's usage as deepq books it, or undefined when its input or output count is missing
 * or no count (negative, Infinity, a string): the caller estimates it then. A bad cache count is
 * 0. Nothing an endpoint says may make a metric or the goal's books throw.
 */
export function reportedUsage(u: Partial<Record<keyof ModelUsage, unknown>> | undefined): ModelUsage | undefined {
  const input = tokenCount(u?.input_tokens);
  const output = tokenCount(u?.output_tokens);
  if (input === undefined || output === undefined) return undefined;
  return {
    input_tokens: input,
    output_tokens: output,
    cache_read_input_tokens: tokenCount(u?.cache_read_input_tokens) ?? 0,
    cache_creation_input_tokens: tokenCount(u?.cache_creation_input_tokens) ?? 0,
  };
}

/** A server that reports no usage: about 4 characters a token, flagged as an estimate. */
export function estimatedUsage(req: ModelRequest, content: ContentBlock[]): ModelUsage {
  const inChars = JSON.stringify(req.system).length + JSON.stringify(req.messages).length;
  const toolChars = req.tools ? JSON.stringify(req.tools).length : 0;
  return {
    input_tokens: Math.ceil((inChars + toolChars) / 4),
    output_tokens: Math.ceil(JSON.stringify(content).length / 4),
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    estimated: true,
  };
}
