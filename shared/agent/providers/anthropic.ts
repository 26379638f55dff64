// The real Anthropic model: @anthropic-ai/sdk, the Messages API. Requests and responses are
// already in deepq's shape. SDK retries are off unless configured: the retry middleware owns
// that policy (it honours retry-after, including 0, and feeds the queue-wide rate limit).
import Anthropic from '@anthropic-ai/sdk';
import { sdkErrorToModelCallError, withDeadline } from './sdk-errors.ts';
import {
  type CallContext,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
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
}

export class AnthropicProvider implements ModelProvider {
  readonly name = 'anthropic';
  private readonly client: Anthropic;
  private readonly timeoutMs: number;
  constructor(opts: AnthropicProviderOptions) {
    this.client = new Anthropic({
      apiKey: opts.apiKey,
      baseURL: opts.baseURL ?? null,
      maxRetries: opts.maxRetries ?? 0,
      timeout: opts.timeoutMs,
      ...(opts.headers ? { defaultHeaders: opts.headers } : {}),
    });
    this.timeoutMs = opts.timeoutMs;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    const call = async (signal: AbortSignal) => {
      const res = await this.client.messages.create(
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
      return res as unknown as ModelResponse;
    };
    return withDeadline(this.timeoutMs, ctx.signal, call, (err) =>
      sdkErrorToModelCallError(err, Anthropic, 'anthropic', ctx.signal),
    );
  }
}
