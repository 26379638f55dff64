// Errors that cross a boundary carry a stable name, so callers (CLI, processors, metrics)
// can decide on policy without parsing messages.

/** Bad configuration or environment: the process must not start. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Input from a user or a job payload that does not fit its contract. */
export class ValidationError extends Error {
  override name = 'ValidationError';
}

/** Model output that breaks the role's output contract (retried once with a reminder). */
export class ContractError extends Error {
  override name = 'ContractError';
}

/** A virtual-FS rule was broken: bad name, too big, too many files. */
export class VfsLimitError extends Error {
  override name = 'VfsLimitError';
}

/** Two writers raced on one artifact name; the loser sees this instead of losing data silently. */
export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
}

/** The provider said 429; the worker pauses its whole queue for `retryAfterMs`. */
export class ProviderRateLimitError extends Error {
  override name = 'ProviderRateLimitError';
  constructor(message: string, readonly retryAfterMs: number) {
    super(message);
  }
}

/** A goal went past one of its budgets (tokens, steps, seconds). */
export class BudgetExceededError extends Error {
  override name = 'BudgetExceededError';
}

/** The goal was cancelled while this work ran. */
export class GoalCancelledError extends Error {
  override name = 'GoalCancelledError';
}

/** A goal id that does not exist. */
export class UnknownGoalError extends Error {
  override name = 'UnknownGoalError';
  constructor(readonly goalId: string) {
    super(`unknown goal id: ${goalId}`);
  }
}
