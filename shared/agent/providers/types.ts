// The model port. Requests and responses follow the Anthropic Messages API shape, so the
// anthropic provider passes them through and the scripted one speaks the same language.

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
export type ContentBlock = TextBlock | ToolUseBlock;

export interface Message {
  role: 'user' | 'assistant';
  content: string | (TextBlock | ToolUseBlock | ToolResultBlock)[];
}

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
}

export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

export interface ModelResponse {
  model: string;
  content: ContentBlock[];
  stop_reason: string | null;
  usage: ModelUsage;
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
  goalId?: string;
  step?: number;
  threadId?: string;
  signal?: AbortSignal;
  subject?: CallSubject;
}

export interface ModelProvider {
  readonly name: 'anthropic' | 'scripted';
  createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse>;
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
}

export function responseText(res: ModelResponse): string {
  return res.content
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('');
}
