// The real Anthropic model: @anthropic-ai/sdk, the Messages API. Requests and responses are
// already in deepq's shape. SDK retries are off unless configured: the retry middleware owns
// that policy (it honours retry-after, including 0, and feeds the queue-wide rate limit).
// Answers are streamed (the SDK's MessageStream puts them together): a long answer takes as long
// as it streams, while an endpoint that goes quiet is given up after the idle timeout.
// The SDK loads at the first call: a process on the scripted model, or on another provider,
// never pays its import.
import { randomUUID } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { StreamedMessageMender } from './anthropic-events.ts';
import { mendedStream } from './mended-stream.ts';
import { headersOverEnv } from './sdk-env.ts';
import { type CallTimeouts, callTimeouts, sdkErrorToModelCallError, withTimeouts } from './sdk-errors.ts';
import {
  type CallContext,
  estimatedUsage,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  reportedUsage,
  type ThinkingParam,
} from './types.ts';

export { parseRetryAfterMs } from './retry-after.ts';

export interface AnthropicProviderOptions {
  apiKey: string;
  baseURL?: string;
  /** Longest wait for the model's next output (streamed: between events; else the whole answer). */
  timeoutMs: number;
  /** The whole call's limit when streamed (default: timeoutMs, as for an answer not streamed). */
  maxCallMs?: number;
  /** Streamed answers (default); false for a gateway that only answers whole. */
  stream?: boolean;
  /** Sent with every request (a gateway's own auth, say). */
  headers?: Record<string, string>;
  /** The SDK's own retries: 0 unless the role's middleware has no `retry`. */
  maxRetries?: number;
  /** Called once when a response had no usage (it is estimated from then on). */
  onEstimatedUsage?: (provider: string, model: string) => void;
}

type Sdk = typeof Anthropic;
let sdk: Promise<Sdk> | undefined;
const loadSdk = () => (sdk ??= import('@anthropic-ai/sdk').then((m) => m.default));
let streamLib: Promise<typeof import('@anthropic-ai/sdk/lib/MessageStream')> | undefined;
const loadStreamLib = () => (streamLib ??= import('@anthropic-ai/sdk/lib/MessageStream'));

export class AnthropicProvider implements ModelProvider {
  readonly name = 'anthropic';
  private connected?: Promise<{ Sdk: Sdk; client: Anthropic }>;
  private warnedNoUsage = false;
  constructor(private readonly opts: AnthropicProviderOptions) {}

  private get streamed(): boolean {
    return this.opts.stream ?? true;
  }

  private get timeouts(): CallTimeouts {
    return callTimeouts(this.opts);
  }

  private connect(): Promise<{ Sdk: Sdk; client: Anthropic }> {
    const opts = this.opts;
    const client = (Sdk: Sdk) =>
      new Sdk({
        apiKey: opts.apiKey,
        baseURL: opts.baseURL ?? null,
        maxRetries: opts.maxRetries ?? 0,
        // Up to the response's headers only; the idle and whole-call timers cover the body.
        timeout: this.timeouts.maxMs,
        logLevel: 'off',
        defaultHeaders: headersOverEnv('ANTHROPIC_CUSTOM_HEADERS', opts.headers),
      });
    this.connected ??= loadSdk().then((Sdk) => ({ Sdk, client: client(Sdk) }));
    return this.connected;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    const { Sdk, client } = await this.connect();
    const thinking = thinkingWithin(req.thinking, req.max_tokens);
    const body = {
      model: req.model,
      system: req.system as never,
      messages: req.messages as never,
      tools: req.tools as never,
      max_tokens: req.max_tokens,
      ...(thinking ? { thinking } : {}),
      ...(req.effort ? { output_config: { effort: req.effort } } : {}),
    };
    const mender = new StreamedMessageMender();
    const call = async (signal: AbortSignal, alive: () => void) => {
      const res = this.streamed
        ? await streamedMessage(client, body, { signal, alive, mender, onFirstOutput: ctx.onFirstOutput })
        : await client.messages.create(body, { signal });
      return this.checked(res, req);
    };
    try {
      return await withTimeouts(this.timeouts, ctx.signal, call, (err) =>
        sdkErrorToModelCallError(err, Sdk, 'anthropic', ctx.signal, Sdk.AnthropicError),
      );
    } catch (err) {
      // Cut, stalled or cancelled after the answer began: what it used is billed, so booked.
      if (err instanceof ModelCallError) err.spent ??= mender.spent(req);
      throw err;
    }
  }

  private checked(res: unknown, req: ModelRequest): ModelResponse {
    if (!res || !Array.isArray((res as { content?: unknown }).content)) {
      throw new ModelCallError('provider returned a body without a content array', 'malformed');
    }
    const out = { ...(res as ModelResponse), content: checkedContent((res as { content: unknown[] }).content) };
    // A Messages-API gateway that reports no usage: estimated and flagged, as for an OpenAI
    // server without it (booked as 0 tokens, its goal's token budget was never reached).
    const usage = reportedUsage(out.usage);
    if (usage) return { ...out, usage };
    if (!this.warnedNoUsage) {
      this.warnedNoUsage = true;
      this.opts.onEstimatedUsage?.(this.name, req.model);
    }
    return { ...out, usage: estimatedUsage(req, out.content) };
  }
}

type MessageBody = Anthropic.MessageCreateParamsNonStreaming;

/**
 * The answer, streamed and put together by the SDK, each event mended first where a gateway sent
 * less than the API does (anthropic-events.ts); each event is a sign of life.
 */
async function streamedMessage(
  client: Anthropic,
  body: MessageBody,
  o: { signal: AbortSignal; alive: () => void; mender: StreamedMessageMender; onFirstOutput?: () => void },
) {
  const { signal, alive, mender, onFirstOutput } = o;
  const { MessageStream } = await loadStreamLib();
  const events = await client.messages.create({ ...body, stream: true }, { signal });
  alive();
  const stream = MessageStream.fromReadableStream(mendedStream(events, mender.mend, alive));
  if (onFirstOutput) {
    const first = (e: { type: string }) => {
      if (e.type !== 'content_block_delta') return;
      stream.off('streamEvent', first);
      onFirstOutput();
    };
    stream.on('streamEvent', first);
  }
  const message = await stream.finalMessage();
  // The API ends every answer with its stop reason: a stream that ended without one was cut.
  if (!message.stop_reason) throw new ModelCallError('the streamed answer ended before its stop reason', 'malformed');
  return mender.finish(message);
}

/** A thinking block goes back to the API unchanged: one it could not take back is malformed now. */
function checkedThinking(b: { type: string; thinking?: unknown; signature?: unknown; data?: unknown }) {
  const whole =
    b.type === 'thinking'
      ? typeof b.thinking === 'string' && typeof b.signature === 'string'
      : typeof b.data === 'string';
  if (!whole)
    throw new ModelCallError(`provider returned a ${b.type} block without its text or signature`, 'malformed');
  return b as ModelResponse['content'][number];
}

/**
 * Thinking as the call can afford it: a budget must stay under the call's max_tokens, which the
 * goal's budget or a subtask's token cap may have lowered; a call too small for the API's least
 * budget (1024) is made without asking for thinking.
 */
export function thinkingWithin(t: ThinkingParam | undefined, maxTokens: number): ThinkingParam | undefined {
  if (t?.type !== 'enabled') return t;
  const budget = Math.min(t.budget_tokens, maxTokens - 1);
  return budget >= MIN_THINKING_BUDGET ? { type: 'enabled', budget_tokens: budget } : undefined;
}

/** The Messages API's least thinking budget. */
export const MIN_THINKING_BUDGET = 1024;

/**
 * The blocks as the rest of deepq (and the next request) needs them: a Messages-API gateway may
 * send what the real API never does. A block that is not an object, or a tool_use without a name,
 * is a malformed answer (retried); a tool_use without an id gets one, as on the OpenAI wire, and
 * an input that is not an object goes to the tool as it came (its schema check tells the model).
 */
function checkedContent(content: unknown[]): ModelResponse['content'] {
  return content.map((block) => {
    const b = block as { type?: unknown; id?: unknown; name?: unknown; input?: unknown } | null;
    if (!b || typeof b !== 'object' || typeof b.type !== 'string') {
      throw new ModelCallError('provider returned a content block that is not an object with a type', 'malformed');
    }
    if (b.type === 'thinking' || b.type === 'redacted_thinking') return checkedThinking(b as { type: string });
    if (b.type !== 'tool_use') return b as ModelResponse['content'][number];
    if (typeof b.name !== 'string' || !b.name)
      throw new ModelCallError('provider returned a tool_use without a name', 'malformed');
    const id = typeof b.id === 'string' && b.id ? b.id : `toolu_${randomUUID().replaceAll('-', '')}`;
    return { ...b, id } as ModelResponse['content'][number];
  });
}
