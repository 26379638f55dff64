// deepq's errors, by code. Callers (CLI, processors, the VFS) decide on policy by code or
// class, never by message text; Lua error replies and exit codes are mapped here, in one place.

export enum ErrorCode {
  /** Bad configuration or environment: the process must not start. */
  Config = 'CONFIG',
  /** Input from a user or a job payload that does not fit its contract. */
  Validation = 'VALIDATION',
  /** A virtual-FS rule was broken: bad name, too big, too many files. */
  VfsLimit = 'VFS_LIMIT',
  /** Two writers raced on one artifact name; the loser sees this instead of losing data. */
  VersionConflict = 'VERSION_CONFLICT',
  /** The provider said 429; the worker pauses its whole queue for `retryAfterMs`. */
  RateLimited = 'RATE_LIMITED',
  /** A goal went past one of its budgets (tokens, steps, seconds). */
  BudgetExceeded = 'BUDGET_EXCEEDED',
  /** A goal id that does not exist. */
  UnknownGoal = 'UNKNOWN_GOAL',
  /** A job's write after another worker took the job (its lock expired): refused, nothing changed. */
  LockLost = 'LOCK_LOST',
}

export class DeepqError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ConfigError extends DeepqError {
  constructor(message: string) {
    super(ErrorCode.Config, message);
  }
}

export class ValidationError extends DeepqError {
  constructor(message: string) {
    super(ErrorCode.Validation, message);
  }
}

export class VfsLimitError extends DeepqError {
  /** `permanent`: the same write would be refused again (a name, the file count, a done artifact). */
  constructor(
    message: string,
    readonly permanent = false,
  ) {
    super(ErrorCode.VfsLimit, message);
  }
}

export class VersionConflictError extends DeepqError {
  constructor(message: string) {
    super(ErrorCode.VersionConflict, message);
  }
}

/** The writing job's lock is gone or another worker's: its run must stop (the job runs there now). */
export class LockLostError extends DeepqError {
  constructor(message: string) {
    super(ErrorCode.LockLost, message);
  }
}

export class ProviderRateLimitError extends DeepqError {
  constructor(
    message: string,
    /** The provider's retry-after (capped), or undefined: the queue's own backoff decides then. */
    readonly retryAfterMs: number | undefined,
  ) {
    super(ErrorCode.RateLimited, message);
  }
}

/** Which budget ran out: tokens, cycles (steps) or wall-clock seconds. */
export type BudgetKind = 'tokens' | 'steps' | 'seconds';

export class BudgetExceededError extends DeepqError {
  constructor(
    message: string,
    readonly kind: BudgetKind = 'tokens',
    /** Tokens the refused call needed (its input estimate and least output): what a raise must leave. */
    readonly need?: number,
  ) {
    super(ErrorCode.BudgetExceeded, message);
  }
}

export class UnknownGoalError extends DeepqError {
  constructor(readonly goalId: string) {
    super(ErrorCode.UnknownGoal, `unknown goal id: ${goalId}`);
  }
}

export function hasCode(err: unknown, code: ErrorCode): err is DeepqError {
  return err instanceof DeepqError && err.code === code;
}

/**
 * Lua scripts refuse with an error reply `<CODE> <message>` (shared/vfs/lua/vfsWrite.lua).
 * Returns the typed error for a known code, or null for any other error (e.g. a lost connection).
 */
export function fromScriptError(err: unknown): DeepqError | null {
  const m = /(?:^|\s)(VERSION_CONFLICT|TOO_MANY_FILES|DONE_ARTIFACT|LOCK_LOST) (.*)$/s.exec(
    err instanceof Error ? err.message : '',
  );
  if (!m) return null;
  if (m[1] === 'VERSION_CONFLICT') return new VersionConflictError(`version conflict: ${m[2]}`);
  if (m[1] === 'LOCK_LOST') return new LockLostError(m[2]!);
  return new VfsLimitError(m[2]!, true);
}

/** Redis refuses writes when full (maxmemory with noeviction); say so in words a user acts on. */
export function userMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (/^OOM command not allowed/.test(message)) {
    const what = 'Redis is out of memory (maxmemory reached, policy noeviction): nothing was stored';
    return `${what}; free memory or raise maxmemory (${message})`;
  }
  return message;
}

/** EX_CONFIG (78) for a config error, so supervisors do not restart-loop on it; else 1. */
export function exitCodeFor(err: unknown): number {
  return hasCode(err, ErrorCode.Config) ? 78 : 1;
}
