import type { Logger } from 'pino';
import type { Usage } from '../../goal/store.ts';
import type { CallContext, ModelRequest, ModelResponse } from '../providers/types.ts';

export type Next = (req: ModelRequest) => Promise<ModelResponse>;
export type ModelMiddleware = (req: ModelRequest, ctx: CallContext, next: Next) => Promise<ModelResponse>;

/** Where token accounting sends each response's usage (goal totals, metrics, budgets). */
export type UsageSink = (ctx: CallContext, model: string, usage: Usage) => Promise<void>;

export interface MiddlewareDeps {
  logger: Logger;
  models: { HIGH: string; LOW: string };
  usageSink?: UsageSink;
  retry?: { maxRetries?: number; baseDelayMs?: number; maxDelayMs?: number; rateLimitToQueue?: boolean };
}
