// The real model: @anthropic-ai/sdk. SDK retries are off: the retry middleware owns that
// policy (it honours retry-after, including 0, and feeds the queue-wide rate limit).
import Anthropic from '@anthropic-ai/sdk';
import {
  type CallContext,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from './types.ts';

export interface AnthropicProviderOptions {
  apiKey: string;
  baseURL?: string;
  timeoutMs: number;
}

export function parseRetryAfterMs(headers: Headers | Record<string, string> | undefined): number | undefined {
  if (!headers) return undefined;
  const get = (k: string) =>
    (headers instanceof Headers ? headers.get(k) : (headers as Record<string, string>)[k]) ?? null;
  const ms = get('retry-after-ms');
  if (ms !== null && ms !== '' && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const s = get('retry-after');
  if (s === null || s === '') return undefined;
  if (Number.isFinite(Number(s))) return Math.max(0, Number(s) * 1000);
  const at = Date.parse(s);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

export class AnthropicProvider implements ModelProvider {
  readonly name = 'anthropic' as const;
  private readonly client: Anthropic;
  private readonly timeoutMs: number;
  constructor(opts: AnthropicProviderOptions) {
    this.client = new Anthropic({
      apiKey: opts.apiKey,
      baseURL: opts.baseURL ?? null,
      maxRetries: 0,
      timeout: opts.timeoutMs,
    });
    this.timeoutMs = opts.timeoutMs;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    // The SDK's timeout covers the fetch up to the response headers only; a body that
    // stalls after them would hang the job forever. This deadline covers the whole call.
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const signal = ctx.signal ? AbortSignal.any([ctx.signal, deadline]) : deadline;
    try {
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
    } catch (err) {
      if (deadline.aborted && !ctx.signal?.aborted && !(err instanceof ModelCallError))
        throw new ModelCallError('model call timed out', 'timeout');
      throw toModelCallError(err, ctx.signal);
    }
  }
}

function toModelCallError(err: unknown, signal?: AbortSignal): ModelCallError {
  if (err instanceof ModelCallError) return err;
  if (signal?.aborted || err instanceof Anthropic.APIUserAbortError)
    return new ModelCallError('model call aborted', 'aborted');
  if (err instanceof Anthropic.APIConnectionTimeoutError) return new ModelCallError('model call timed out', 'timeout');
  if (err instanceof Anthropic.APIConnectionError)
    return new ModelCallError(`connection error: ${err.message}`, 'connection');
  if (err instanceof Anthropic.APIError) {
    const status = err.status ?? 0;
    const retryAfterMs = parseRetryAfterMs(err.headers as Headers | undefined);
    const msg = `anthropic API ${status}: ${err.message}`.slice(0, 500);
    if (status === 429) return new ModelCallError(msg, 'rate_limit', status, retryAfterMs);
    if (status >= 500 || status === 408 || status === 409)
      return new ModelCallError(msg, 'server', status, retryAfterMs);
    return new ModelCallError(msg, 'client', status);
  }
  if (err instanceof SyntaxError) return new ModelCallError(`malformed response body: ${err.message}`, 'malformed');
  return new ModelCallError(`model call failed: ${(err as Error)?.message ?? String(err)}`, 'connection');
}
