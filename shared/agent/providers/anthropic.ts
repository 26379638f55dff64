// The real Anthropic model: @anthropic-ai/sdk, the Messages API. Requests and responses are
// already in deepq's shape. SDK retries are off unless configured: the retry middleware owns
// that policy (it honours retry-after, including 0, and feeds the queue-wide rate limit).
// The SDK loads at the first call: a process on the scripted model, or on another provider,
// never pays its import.
import { randomUUID } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { headersOverEnv } from './sdk-env.ts';
import { sdkErrorToModelCallError, withDeadline } from './sdk-errors.ts';
import {
  type CallContext,
  estimatedUsage,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  reportedUsage,
} from './types.ts';

export { parseRetryAfterMs } from './retry-after.ts';

export interface AnthropicProviderOptions {
  apiKey: string;
  baseURL?: string;
  timeoutMs: number;
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

export class AnthropicProvider implements ModelProvider {
  readonly name = 'anthropic';
  private connected?: Promise<{ Sdk: Sdk; client: Anthropic }>;
  private warnedNoUsage = false;
  constructor(private readonly opts: AnthropicProviderOptions) {}

  private connect(): Promise<{ Sdk: Sdk; client: Anthropic }> {
    const opts = this.opts;
    const client = (Sdk: Sdk) =>
      new Sdk({
        apiKey: opts.apiKey,
        baseURL: opts.baseURL ?? null,
        maxRetries: opts.maxRetries ?? 0,
        timeout: opts.timeoutMs,
        logLevel: 'off',
        defaultHeaders: headersOverEnv('ANTHROPIC_CUSTOM_HEADERS', opts.headers),
      });
    this.connected ??= loadSdk().then((Sdk) => ({ Sdk, client: client(Sdk) }));
    return this.connected;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    const { Sdk, client } = await this.connect();
    const call = async (signal: AbortSignal) => {
      const res = await client.messages.create(
        {
          model: req.model,
          system: req.system as never,
          messages: req.messages as never,
          tools: req.tools as never,
          max_tokens: req.max_tokens,
        },
        { signal },
      );
      if (!res || !Array.isArray((res as { content?: unknown }).content)) {
        throw new ModelCallError('provider returned a body without a content array', 'malformed');
      }
      const out = {
        ...(res as unknown as ModelResponse),
        content: checkedContent((res as { content: unknown[] }).content),
      };
      // A Messages-API gateway that reports no usage: estimated and flagged, as for an OpenAI
      // server without it (booked as 0 tokens, its goal's token budget was never reached).
      const usage = reportedUsage(out.usage);
      if (usage) return { ...out, usage };
      if (!this.warnedNoUsage) {
        this.warnedNoUsage = true;
        this.opts.onEstimatedUsage?.(this.name, req.model);
      }
      return { ...out, usage: estimatedUsage(req, out.content) };
    };
    return withDeadline(this.opts.timeoutMs, ctx.signal, call, (err) =>
      sdkErrorToModelCallError(err, Sdk, 'anthropic', ctx.signal),
    );
  }
}

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
    if (b.type !== 'tool_use') return b as ModelResponse['content'][number];
    if (typeof b.name !== 'string' || !b.name)
      throw new ModelCallError('provider returned a tool_use without a name', 'malformed');
    const id = typeof b.id === 'string' && b.id ? b.id : `toolu_${randomUUID().replaceAll('-', '')}`;
    return { ...b, id } as ModelResponse['content'][number];
  });
}
