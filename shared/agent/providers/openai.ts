// An OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio,
// OpenRouter, ...) through the official `openai` SDK's Chat Completions, mapped to and from
// deepq's shape by ./openai-wire.ts. Errors map to the same ModelCallError kinds as the
// Anthropic provider's, so retry, queue pausing, budgets and metrics behave the same. SDK
// retries are off unless configured: the retry middleware owns that policy. The SDK is loaded
// at the first call: a process whose models use no openai provider never loads it. Answers are
// streamed (with their usage, `stream_options.include_usage`), as for the anthropic provider: a
// slow local model's long answer is not cut, a server that goes quiet is given up.
import type OpenAI from 'openai';
import { mendedChunkStream } from './openai-chunks.ts';
import { fromChatCompletion, type MaxTokensParam, toChatRequest } from './openai-wire.ts';
import { headersOverEnv } from './sdk-env.ts';
import { type CallTimeouts, callTimeouts, sdkErrorToModelCallError, withTimeouts } from './sdk-errors.ts';
import {
  type CallContext,
  estimatedUsage,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from './types.ts';

export interface OpenAIProviderOptions {
  /** The provider's name in config (errors name it). */
  name: string;
  baseURL: string;
  /** Servers that need none (a local Ollama) get a placeholder. */
  apiKey?: string;
  /** Longest wait for the model's next output (streamed: between chunks; else the whole answer). */
  timeoutMs: number;
  /** The whole call's limit when streamed (default: timeoutMs). */
  maxCallMs?: number;
  /** Streamed answers (default); false for a server that cannot stream. */
  stream?: boolean;
  headers?: Record<string, string>;
  /** The SDK's own retries: 0 unless the role's middleware has no `retry`. */
  maxRetries?: number;
  /** `max_completion_tokens` for OpenAI's reasoning models; most servers take `max_tokens`. */
  maxTokensParam?: MaxTokensParam;
  /** Called once per provider when a response had no usage (it is estimated from then on). */
  onEstimatedUsage?: (provider: string, model: string) => void;
}

type Sdk = typeof OpenAI;
let sdk: Promise<Sdk> | undefined;
const loadSdk = () => (sdk ??= import('openai').then((m) => m.default));
let streamLib: Promise<typeof import('openai/lib/ChatCompletionStream')> | undefined;
const loadStreamLib = () => (streamLib ??= import('openai/lib/ChatCompletionStream'));

export class OpenAIProvider implements ModelProvider {
  readonly name: string;
  private connected?: Promise<{ Sdk: Sdk; client: OpenAI }>;
  private warnedNoUsage = false;
  constructor(private readonly opts: OpenAIProviderOptions) {
    this.name = opts.name;
  }

  private get timeouts(): CallTimeouts {
    return callTimeouts(this.opts);
  }

  private connect(): Promise<{ Sdk: Sdk; client: OpenAI }> {
    const opts = this.opts;
    // Every option given explicitly: the SDK would otherwise read OPENAI_* from the environment.
    const client = (Sdk: Sdk) =>
      new Sdk({
        apiKey: opts.apiKey || 'not-needed',
        baseURL: opts.baseURL,
        organization: null,
        project: null,
        maxRetries: opts.maxRetries ?? 0,
        // Up to the response's headers only; the idle and whole-call timers cover the body.
        timeout: this.timeouts.maxMs,
        logLevel: 'off',
        defaultHeaders: headersOverEnv('OPENAI_CUSTOM_HEADERS', opts.headers),
      });
    this.connected ??= loadSdk().then((Sdk) => ({ Sdk, client: client(Sdk) }));
    return this.connected;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    const { Sdk, client } = await this.connect();
    const body = toChatRequest(req, this.opts.maxTokensParam ?? 'max_tokens');
    const streamed = { chars: 0, began: false };
    const call = async (signal: AbortSignal, alive: () => void) => {
      const completion =
        (this.opts.stream ?? true)
          ? await streamedCompletion(client, body, { signal, alive, streamed, onFirstOutput: ctx.onFirstOutput })
          : await client.chat.completions.create(body, { signal });
      const res = fromChatCompletion(completion, req);
      if (res.usage.estimated && !this.warnedNoUsage) {
        this.warnedNoUsage = true;
        this.opts.onEstimatedUsage?.(this.name, req.model);
      }
      return res;
    };
    try {
      return await withTimeouts(this.timeouts, ctx.signal, call, (err) => this.toError(Sdk, err, req, ctx.signal));
    } catch (err) {
      // Cut, stalled or cancelled after the answer began: billed, so booked (its usage comes only
      // at the end: estimated, the prompt's and what streamed, about 4 characters a token).
      if (err instanceof ModelCallError && streamed.began) {
        err.spent ??= { ...estimatedUsage(req, []), output_tokens: Math.ceil(streamed.chars / 4) };
      }
      throw err;
    }
  }

  private toError(Sdk: Sdk, err: unknown, req: ModelRequest, signal?: AbortSignal): ModelCallError {
    const mapped = sdkErrorToModelCallError(err, Sdk, `${this.name} (openai)`, signal, Sdk.OpenAIError);
    if (req.tools?.length && mapped.kind !== 'rate_limit' && refusesTools(err, mapped.status ?? 0)) {
      const said = (err as Error).message.slice(0, 300);
      const message =
        `provider "${this.name}" (${this.opts.baseURL}) refused tool calling for model "${req.model}": ` +
        `it may not support tools; give the role a model that does, or no tools. The server said: ${said}`;
      return new ModelCallError(message, 'client', mapped.status);
    }
    return mapped;
  }
}

type ChatBody = ReturnType<typeof toChatRequest>;

/**
 * The completion, streamed and put together by the SDK, each chunk mended first where a lax
 * server left a tool call's index or type out (openai-chunks.ts); each chunk is a sign of life.
 */
async function streamedCompletion(
  client: OpenAI,
  body: ChatBody,
  o: {
    signal: AbortSignal;
    alive: () => void;
    streamed: { chars: number; began: boolean };
    onFirstOutput?: () => void;
  },
) {
  const { signal, alive, streamed, onFirstOutput } = o;
  const params = { ...body, stream: true as const, stream_options: { include_usage: true } };
  const { ChatCompletionStream } = await loadStreamLib();
  const chunks = await client.chat.completions.create(params, { signal });
  alive();
  const stream = ChatCompletionStream.fromReadableStream(mendedChunkStream(chunks, alive));
  stream.on('chunk', (chunk) => {
    streamed.began = true;
    for (const c of chunk.choices ?? []) streamed.chars += JSON.stringify(c.delta ?? {}).length;
  });
  if (onFirstOutput) {
    const first = (chunk: OpenAI.ChatCompletionChunk) => {
      // Reasoning servers (vLLM's reasoning parser, DeepSeek) stream it first as reasoning_content.
      const delta = chunk.choices[0]?.delta as
        | (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string })
        | undefined;
      if (!delta?.content && !delta?.tool_calls?.length && !delta?.reasoning_content) return;
      stream.off('chunk', first);
      onFirstOutput();
    };
    stream.on('chunk', first);
  }
  return stream.finalChatCompletion();
}

/**
 * What servers answer when a model or setup has no tool calling: Ollama "does not support
 * tools", vLLM "auto tool choice requires --enable-auto-tool-choice", llama.cpp "tools param
 * requires --jinja flag". Such an error is not worth retrying.
 */
function refusesTools(err: unknown, status: number): boolean {
  const message = err instanceof Error ? err.message : '';
  if (status < 400) return false;
  // llama.cpp answers its refusal with a 500: only the known phrases, where any other 5xx
  // naming tools (a tool parser that failed once) is a fault worth retrying.
  if (status >= 500) return /jinja|does not support tools|enable-auto-tool-choice/i.test(message);
  const aboutTools = /\b(tools?|tool[ _]choice|function[ _]call(ing)?)\b/i.test(message);
  return aboutTools && /support|requires?|enable|jinja/i.test(message);
}
