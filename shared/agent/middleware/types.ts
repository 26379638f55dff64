import type { Logger } from 'pino';
import type { Usage, UsageOrigin } from '../../goal/store.ts';
import type { CallContext, ModelRequest, ModelResponse } from '../providers/types.ts';

export type Next = (req: ModelRequest) => Promise<ModelResponse>;
export type ModelMiddleware = (req: ModelRequest, ctx: CallContext, next: Next) => Promise<ModelResponse>;

/**
 * Where token accounting sends each response's usage (goal totals, metrics), with the
 * reservation the call held (its member in the goal's reservations), ended in the same write,
 * and the usage's origin (the model id requested, whether the counts are an estimate).
 */
export type UsageSink = (
  ctx: CallContext,
  model: string,
  usage: Usage,
  reservation?: string,
  origin?: UsageOrigin,
) => Promise<void>;

/**
 * Reserves a call's tokens before it is made. `reserve` returns the max output tokens granted
 * (at most what was asked) and the reservation's member ('' when nothing was reserved), or
 * throws BudgetExceededError when no call fits; `release` ends a reservation whose call failed;
 * `calibrate` learns from a reserved call how its input estimate compares with the real count.
 */
export interface CallBudget {
  reserve(req: ModelRequest, ctx: CallContext): Promise<{ maxTokens: number; member: string }>;
  release(member: string): Promise<void>;
  calibrate?(req: ModelRequest, inputTokens: number): Promise<void>;
}

export interface MiddlewareDeps {
  logger: Logger;
  models: { HIGH: string; LOW: string };
  usageSink?: UsageSink;
  budget?: CallBudget;
  retry?: {
    maxRetries?: number;
    baseDelayMs?: number;
    maxDelayMs?: number;
    rateLimitToQueue?: boolean;
    /** 5xx and dropped connections are retried in place as long as a rate limit (planner, reflector). */
    patient?: boolean;
  };
}
