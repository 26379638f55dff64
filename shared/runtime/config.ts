// One config, validated by zod: defaults < config file (DEEPQ_CONFIG, JSON or YAML) < env.
// A bad value stops the process at start with the field's path in the message.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { approvalMatchesRoleTool } from '../agent/approval.ts';
import { ProvidersSchema, providerEnvValues, providerIssues, usedProviders } from '../agent/providers/settings.ts';
import {
  AgentOverridesSchema,
  DEFAULT_MAX_TOKENS,
  MCP_TOOL_RE,
  RoleSpecSchema,
  resolveRoleOverrides,
  thinkingProblem,
} from '../agent/roles.ts';
import { ConfigError } from '../errors.ts';
import { BudgetsSchema } from '../goal/budgets.ts';
import { PROGRESS_KEPT } from '../goal/progress.ts';
import { formatZodIssues, timerMs } from '../zod.ts';
import { unknownEnvNotice } from './env-names.ts';

/** A price without cache prices charges cached tokens as input: never $0 for tokens that were billed. */
const PriceSchema = z
  .object({
    inputPerMTok: z.number().nonnegative(),
    outputPerMTok: z.number().nonnegative(),
    cacheReadPerMTok: z.number().nonnegative().optional(),
    cacheWritePerMTok: z.number().nonnegative().optional(),
  })
  .strict()
  .transform((p) => ({
    ...p,
    cacheReadPerMTok: p.cacheReadPerMTok ?? p.inputPerMTok,
    cacheWritePerMTok: p.cacheWritePerMTok ?? p.inputPerMTok,
  }));

/** An environment variable's value, by name: secrets stay out of the config file. */
const EnvRef = z.object({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/) }).strict();
/** A literal value that `pattern` holds, or an environment variable's. */
const ValueOrEnv = (pattern: RegExp, message: string) => z.union([z.string().regex(pattern, message), EnvRef]);

/**
 * Tools of a server that may run again after a crash although the server marks them neither
 * read-only nor idempotent (`'*'`: all of them); any other is called at most once.
 */
const IdempotentTools = z
  .union([z.literal('*'), z.array(z.string().min(1))], { error: 'must be "*" or a list of tool names' })
  .optional();

/** An HTTP header's name (RFC 9110 token); its value on one line: a CR or LF would split the request. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
export const HEADER_VALUE = /^[^\r\n\0]*$/;
const McpHeaders = z
  .record(
    z.string().regex(HEADER_NAME, "an HTTP header name: letters, digits and !#$%&'*+.^_`|~- only"),
    ValueOrEnv(HEADER_VALUE, 'a header value holds no line break or NUL'),
  )
  .default({});

/** One MCP server: a command over stdio, or a streamable-HTTP endpoint. */
export const McpServerSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('stdio'),
      command: z.string().min(1),
      args: z.array(z.string()).default([]),
      env: z
        .record(
          z.string().regex(/^[^=\0]+$/, 'an environment variable name holds no = or NUL'),
          ValueOrEnv(/^[^\0]*$/, 'an environment value holds no NUL'),
        )
        .default({}),
      timeoutMs: timerMs().default(60_000),
      idempotentTools: IdempotentTools,
    })
    .strict(),
  z
    .object({
      type: z.literal('http'),
      url: z
        .string()
        .url()
        .regex(/^https?:\/\//i, 'must be an http:// or https:// URL (the streamable-HTTP endpoint)'),
      headers: McpHeaders,
      timeoutMs: timerMs().default(60_000),
      idempotentTools: IdempotentTools,
    })
    .strict(),
]);
export type McpServerConfig = z.infer<typeof McpServerSchema>;

/**
 * A Redis URL ioredis reads as meant: it parses (a `#`, `%` or `/` in a password must be
 * percent-encoded) and names a database by number, if at all (ioredis sends `SELECT NaN`).
 */
function checkRedisUrl(value: string, ctx: z.RefinementCtx): void {
  let url: URL;
  try {
    url = new URL(value);
    decodeURIComponent(url.password);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'is not a valid URL (percent-encode # % / @ in the password)' });
    return;
  }
  // ioredis would take an empty host for localhost: the URL given names no Redis.
  if (!url.hostname) ctx.addIssue({ code: 'custom', message: 'has no host (redis://HOST:PORT)' });
  if (!/^\/?(\d{1,5})?$/.test(url.pathname))
    ctx.addIssue({ code: 'custom', message: `the path ${JSON.stringify(url.pathname)} must be a database number` });
}

export const ConfigSchema = z
  .object({
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
      .superRefine(checkRedisUrl)
      .default('redis://127.0.0.1:6379'),
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - only')
      .default('deepq'),
    modelProvider: z.enum(['anthropic', 'scripted']).optional(),
    anthropicApiKey: z
      .string()
      .min(1)
      // The k8s example Secret's value, applied as is: every call would be a 401.
      .refine((v) => !v.startsWith('replace-with'), 'is the example placeholder: set your real key')
      .optional(),
    anthropicBaseUrl: z.string().url().optional(),
    /** Longest wait for a model's next output: between a streamed answer's events, or for a whole one. */
    modelTimeoutMs: timerMs().default(120_000),
    /** A streamed answer's whole-call limit (a long answer streams for minutes without a pause). */
    modelMaxCallMs: timerMs().default(600_000),
    models: z
      .object({
        HIGH: z.string().min(1).default('claude-sonnet-5-5'),
        LOW: z.string().min(1).default('claude-haiku-5-5'),
      })
      .strict()
      .prefault({}),
    /** Model endpoints beyond the predefined `anthropic`; models name them as `<provider>:<id>`. */
    providers: ProvidersSchema,
    scriptedLatencyMs: z.number().int().nonnegative().default(0),
    /** Scripted model only: the first plan has this many research subtasks (benchmarks). */
    scriptedFanout: z.number().int().min(0).max(5).default(0),
    /** The role set; entries without systemPrompt override default roles (resolveRoleOverrides). */
    roles: z.preprocess(
      (value, ctx) =>
        resolveRoleOverrides(value, (i, message) => ctx.addIssue({ code: 'custom', path: [i, 'name'], message })),
      z
        .array(RoleSpecSchema)
        .min(3, 'deepq needs 3 to 8 roles')
        .max(8, 'deepq needs 3 to 8 roles')
        .refine((roles) => new Set(roles.map((r) => r.name)).size === roles.length, 'role names must be unique'),
    ),
    /** MCP servers roles may take tools from (`mcp:<server>/<tool>`); see shared/agent/mcp/. */
    mcpServers: z
      .record(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,40}$/, 'server names: a-z, 0-9, _ and -'), McpServerSchema)
      .default({}),
    planner: AgentOverridesSchema.default({}),
    reflector: AgentOverridesSchema.default({}),
    maxDepth: z.number().int().min(1).max(100).default(5),
    /**
     * Stall detection (shared/goal/progress.ts): after `cycles` cycles in a row without
     * progress the reflector escalates (or fails the goal) without asking the model; 0 turns it off.
     */
    stall: z
      .object({
        // The progress record keeps the last PROGRESS_KEPT cycles: more could never be seen.
        cycles: z.number().int().min(0).max(PROGRESS_KEPT).default(3),
        action: z.enum(['escalate', 'fail']).default('escalate'),
      })
      .strict()
      .prefault({}),
    subtaskAttempts: z.number().int().min(1).max(20).default(3),
    budgets: BudgetsSchema.default({}),
    vfs: z
      .object({
        /** Private by default: under the user's own state dir, never a shared temp path. */
        blobDir: z.string().min(1).default(defaultBlobDir()),
        /** The assembled subagent task (instruction plus read_files) stays under this many chars. */
        taskMaxChars: z.number().int().min(1000).default(200_000),
        /** A blob no entry references is removed by the sweep once it is this old. */
        orphanBlobGraceSeconds: z.number().int().positive().default(3600),
        spillBytes: z
          .number()
          .int()
          .positive()
          .default(100 * 1024),
        maxArtifactBytes: z
          .number()
          .int()
          .positive()
          .default(5 * 1024 * 1024),
        maxFilesPerGoal: z.number().int().positive().default(500),
        evictDoneAfterSteps: z.number().int().nonnegative().default(3),
        evictAnyAfterSteps: z.number().int().positive().default(20),
        /** Cycles an evicted name's tombstone stays in the index. */
        tombstoneSteps: z.number().int().min(1).default(1),
        toolResultMaxChars: z.number().int().positive().default(50_000),
      })
      .strict()
      .prefault({}),
    retentionSeconds: z.number().int().positive().default(86_400),
    sweepIntervalSeconds: z.number().int().positive().default(60),
    /** Completed jobs each queue keeps at most (they also go after an hour); the sweep enforces it. */
    completedJobsKept: z.number().int().positive().default(50_000),
    /** The inspector's sign-in lockout: this many wrong tokens from one address within the window. */
    uiSignInMaxFailures: z.number().int().positive().default(20),
    uiSignInWindowSeconds: z.number().int().positive().default(600),
    /** The inspector links a goal's trace here: an http(s) URL with `{traceId}` in it. */
    traceUrl: z
      .string()
      .refine(
        (v) => /^https?:\/\/[^\s]+$/.test(v) && URL.canParse(v.replaceAll('{traceId}', '0')),
        'must be an http(s) URL',
      )
      .refine((v) => v.includes('{traceId}'), 'must contain {traceId} (where the trace id goes)')
      .optional(),
    /** How often the reconciler looks for goals whose next job is missing, and how long it waits. */
    reconcileIntervalSeconds: z.number().int().positive().default(30),
    reconcileGraceSeconds: z.number().int().positive().default(60),
    /** A goal awaiting a human longer than this ends `cancelled` with the reason (keys never expire under it). */
    awaitingRetentionSeconds: z
      .number()
      .int()
      .positive()
      .default(30 * 86_400),
    /** A tool call waiting for a human's approval longer than this is refused (`timeout`). */
    approvalTimeoutSeconds: z.number().int().positive().default(86_400),
    /**
     * Backstop EXPIRE on every goal key, renewed by the goal's moves once less than half of it is left
     * (not by model calls or writes): it must outlast a cycle's longest stretch between moves.
     */
    goalKeyTtlSeconds: z
      .number()
      .int()
      .positive()
      .default(7 * 86_400),
    transcriptTtlSeconds: z.number().int().positive().default(86_400),
    /** Transcripts kept per goal (newest first) and the cap on each stored text block. */
    transcriptsPerGoal: z.number().int().positive().default(20),
    transcriptMaxBlockChars: z.number().int().positive().default(2000),
    /** The goal timeline is a capped stream: about 250 bytes an event. */
    eventsMaxLen: z.number().int().positive().default(1000),
    concurrency: z.number().int().min(1).max(1000).default(8),
    // The hard stop comes 10 s after the drain (and `deepq up`'s 5 s after that): both must fit a timer.
    drainTimeoutMs: timerMs(60_000).default(25_000),
    lockDurationMs: timerMs().default(30_000),
    stalledIntervalMs: timerMs().default(15_000),
    /** A job whose worker died this many times fails (a guard against jobs that crash every worker). */
    maxStalledCount: z.number().int().min(1).default(2),
    /** Model-call retries on 429 (outside workers), 5xx, timeouts and malformed bodies. */
    modelRetry: z
      .object({
        maxRetries: z.number().int().min(0).max(20).default(3),
        baseDelayMs: timerMs().default(500),
        maxDelayMs: timerMs().default(30_000),
        /** A worker job re-queued by this many provider 429s in a row fails its attempt instead. */
        maxRateLimitRequeues: z.number().int().min(1).default(50),
        /** How long a role queue keeps its rate limit switched on after its last 429 (queue-rate-limit.ts). */
        rateLimitHoldSeconds: z.number().int().positive().default(60),
      })
      .strict()
      .prefault({}),
    metricsPort: z.number().int().min(0).max(65535).default(0),
    /** The ops server's bind address: loopback unless set (compose and k8s set 0.0.0.0). */
    metricsHost: z.string().min(1).default('127.0.0.1'),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    // Estimated USD per million tokens, for `deepq status` / `deepq goals`; set your own in config.
    prices: z.record(z.string(), PriceSchema).default({
      'claude-sonnet-5-5': { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 },
      'claude-haiku-5-5': { inputPerMTok: 1, outputPerMTok: 5, cacheReadPerMTok: 0.1, cacheWritePerMTok: 1.25 },
      'scripted-high': { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 },
      'scripted-low': { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 },
    }),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    checkApprovals(cfg, ctx);
    for (const { path, message } of providerIssues(cfg)) ctx.addIssue({ code: 'custom', path, message });
    for (const agent of ['planner', 'reflector'] as const) {
      const spec = { maxTokens: DEFAULT_MAX_TOKENS, ...cfg[agent] };
      const thinking = thinkingProblem(spec);
      if (thinking) ctx.addIssue({ code: 'custom', path: [agent, 'thinking', 'budgetTokens'], message: thinking });
    }
    for (const [i, role] of cfg.roles.entries()) {
      const thinking = thinkingProblem(role);
      if (thinking) ctx.addIssue({ code: 'custom', path: ['roles', i, 'thinking', 'budgetTokens'], message: thinking });
      for (const [j, tool] of role.tools.entries()) {
        const server = MCP_TOOL_RE.exec(tool)?.[1];
        if (server === undefined || cfg.mcpServers[server]) continue;
        const message = `tool ${JSON.stringify(tool)} names MCP server "${server}", which is not in mcpServers`;
        ctx.addIssue({ code: 'custom', path: ['roles', i, 'tools', j], message });
      }
    }
  });

/**
 * Every approval entry must match one of its role's tools (a typo would leave a risky tool
 * ungated), and a call must time out before its goal's keys could expire under it.
 */
function checkApprovals(
  cfg: { roles: { tools: string[]; approval: string[] }[]; approvalTimeoutSeconds: number; goalKeyTtlSeconds: number },
  ctx: z.RefinementCtx,
): void {
  for (const [i, role] of cfg.roles.entries()) {
    for (const [j, entry] of role.approval.entries()) {
      if (role.tools.some((t) => approvalMatchesRoleTool(entry, t))) continue;
      const tools = role.tools.join(', ') || 'none';
      const message = `approval entry ${JSON.stringify(entry)} matches none of the role's tools (${tools})`;
      ctx.addIssue({ code: 'custom', path: ['roles', i, 'approval', j], message });
    }
  }
  // A request sets the keys' whole TTL: a wait of at most half leaves the rest of the run what any
  // move leaves it. Closer to the TTL, the keys expired under the subtask carrying on after a timeout.
  if (cfg.approvalTimeoutSeconds * 2 > cfg.goalKeyTtlSeconds) {
    const message =
      `must be at most half of goalKeyTtlSeconds (${cfg.goalKeyTtlSeconds}): ` +
      "a goal's keys must outlive a wait and the work after it";
    ctx.addIssue({ code: 'custom', path: ['approvalTimeoutSeconds'], message });
  }
}

export type Config = z.infer<typeof ConfigSchema> & {
  modelProvider: 'anthropic' | 'scripted';
  /** Set when the provider was chosen by default rather than asked for. */
  providerNotice?: string;
  /** The values of the environment variables `providers` name (keys, headers), as loaded. */
  providerEnv: Record<string, string>;
  /** Set when the environment holds DEEPQ_* variables deepq does not read (misspelt settings). */
  envNotice?: string;
};

/**
 * `$XDG_STATE_HOME/deepq/blobs` (else `~/.local/state/deepq/blobs`): a directory of the user's
 * own, not a predictable path under the shared temp dir that any local user could read or plant.
 */
export function defaultBlobDir(env: NodeJS.ProcessEnv = process.env): string {
  const state = env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state');
  return join(state, 'deepq', 'blobs');
}

/** Env var → config path, and how to parse it. */
const ENV_MAP: Record<string, { path: string[]; kind: 'string' | 'int' | 'number' }> = {
  REDIS_URL: { path: ['redisUrl'], kind: 'string' },
  DEEPQ_PREFIX: { path: ['prefix'], kind: 'string' },
  DEEPQ_MODEL_PROVIDER: { path: ['modelProvider'], kind: 'string' },
  ANTHROPIC_API_KEY: { path: ['anthropicApiKey'], kind: 'string' },
  ANTHROPIC_BASE_URL: { path: ['anthropicBaseUrl'], kind: 'string' },
  DEEPQ_MODEL_TIMEOUT_MS: { path: ['modelTimeoutMs'], kind: 'int' },
  DEEPQ_MODEL_MAX_CALL_MS: { path: ['modelMaxCallMs'], kind: 'int' },
  DEEPQ_MODEL_HIGH: { path: ['models', 'HIGH'], kind: 'string' },
  DEEPQ_MODEL_LOW: { path: ['models', 'LOW'], kind: 'string' },
  DEEPQ_SCRIPTED_LATENCY_MS: { path: ['scriptedLatencyMs'], kind: 'int' },
  DEEPQ_SCRIPTED_FANOUT: { path: ['scriptedFanout'], kind: 'int' },
  DEEPQ_MAX_DEPTH: { path: ['maxDepth'], kind: 'int' },
  DEEPQ_SUBTASK_ATTEMPTS: { path: ['subtaskAttempts'], kind: 'int' },
  DEEPQ_BLOB_DIR: { path: ['vfs', 'blobDir'], kind: 'string' },
  DEEPQ_SPILL_BYTES: { path: ['vfs', 'spillBytes'], kind: 'int' },
  DEEPQ_MAX_ARTIFACT_BYTES: { path: ['vfs', 'maxArtifactBytes'], kind: 'int' },
  DEEPQ_MAX_FILES_PER_GOAL: { path: ['vfs', 'maxFilesPerGoal'], kind: 'int' },
  DEEPQ_EVICT_DONE_AFTER_STEPS: { path: ['vfs', 'evictDoneAfterSteps'], kind: 'int' },
  DEEPQ_EVICT_ANY_AFTER_STEPS: { path: ['vfs', 'evictAnyAfterSteps'], kind: 'int' },
  DEEPQ_TOMBSTONE_STEPS: { path: ['vfs', 'tombstoneSteps'], kind: 'int' },
  DEEPQ_TRANSCRIPT_TTL_SECONDS: { path: ['transcriptTtlSeconds'], kind: 'int' },
  DEEPQ_TRANSCRIPTS_PER_GOAL: { path: ['transcriptsPerGoal'], kind: 'int' },
  DEEPQ_RETENTION_SECONDS: { path: ['retentionSeconds'], kind: 'int' },
  DEEPQ_SWEEP_INTERVAL_SECONDS: { path: ['sweepIntervalSeconds'], kind: 'int' },
  DEEPQ_COMPLETED_JOBS_KEPT: { path: ['completedJobsKept'], kind: 'int' },
  DEEPQ_UI_SIGNIN_MAX_FAILURES: { path: ['uiSignInMaxFailures'], kind: 'int' },
  DEEPQ_UI_SIGNIN_WINDOW_SECONDS: { path: ['uiSignInWindowSeconds'], kind: 'int' },
  DEEPQ_TRACE_URL: { path: ['traceUrl'], kind: 'string' },
  DEEPQ_RECONCILE_INTERVAL_SECONDS: { path: ['reconcileIntervalSeconds'], kind: 'int' },
  DEEPQ_RECONCILE_GRACE_SECONDS: { path: ['reconcileGraceSeconds'], kind: 'int' },
  DEEPQ_AWAITING_RETENTION_SECONDS: { path: ['awaitingRetentionSeconds'], kind: 'int' },
  DEEPQ_TASK_MAX_CHARS: { path: ['vfs', 'taskMaxChars'], kind: 'int' },
  DEEPQ_ORPHAN_BLOB_GRACE_SECONDS: { path: ['vfs', 'orphanBlobGraceSeconds'], kind: 'int' },
  DEEPQ_GOAL_KEY_TTL_SECONDS: { path: ['goalKeyTtlSeconds'], kind: 'int' },
  DEEPQ_APPROVAL_TIMEOUT_SECONDS: { path: ['approvalTimeoutSeconds'], kind: 'int' },
  DEEPQ_CONCURRENCY: { path: ['concurrency'], kind: 'int' },
  DEEPQ_DRAIN_TIMEOUT_MS: { path: ['drainTimeoutMs'], kind: 'int' },
  DEEPQ_LOCK_DURATION_MS: { path: ['lockDurationMs'], kind: 'int' },
  DEEPQ_STALLED_INTERVAL_MS: { path: ['stalledIntervalMs'], kind: 'int' },
  DEEPQ_MAX_STALLED_COUNT: { path: ['maxStalledCount'], kind: 'int' },
  DEEPQ_MODEL_MAX_RETRIES: { path: ['modelRetry', 'maxRetries'], kind: 'int' },
  DEEPQ_MODEL_RETRY_BASE_MS: { path: ['modelRetry', 'baseDelayMs'], kind: 'int' },
  DEEPQ_MAX_RATE_LIMIT_REQUEUES: { path: ['modelRetry', 'maxRateLimitRequeues'], kind: 'int' },
  DEEPQ_RATE_LIMIT_HOLD_SECONDS: { path: ['modelRetry', 'rateLimitHoldSeconds'], kind: 'int' },
  DEEPQ_MAX_TOKENS: { path: ['budgets', 'maxTokens'], kind: 'int' },
  DEEPQ_MAX_STEPS: { path: ['budgets', 'maxSteps'], kind: 'int' },
  DEEPQ_MAX_SECONDS: { path: ['budgets', 'maxSeconds'], kind: 'number' },
  DEEPQ_ON_BUDGET: { path: ['budgets', 'onBudget'], kind: 'string' },
  DEEPQ_STALL_CYCLES: { path: ['stall', 'cycles'], kind: 'int' },
  DEEPQ_STALL_ACTION: { path: ['stall', 'action'], kind: 'string' },
  METRICS_PORT: { path: ['metricsPort'], kind: 'int' },
  METRICS_HOST: { path: ['metricsHost'], kind: 'string' },
  LOG_LEVEL: { path: ['logLevel'], kind: 'string' },
};

/** Every variable the config reads from the environment. */
export const CONFIG_ENV_NAMES: readonly string[] = Object.keys(ENV_MAP);
export const CONFIG_ENV_VARS = ['DEEPQ_CONFIG', ...Object.keys(ENV_MAP)];

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function parseEnvValue(name: string, raw: string, kind: 'string' | 'int' | 'number'): unknown {
  if (kind === 'string') return raw;
  const n = Number(raw);
  // In decimal: Number() also reads hex, octal and binary (`0x10` is 16).
  const decimal = raw.trim() !== '' && !/^\s*[-+]?0[xob]/i.test(raw);
  if (!decimal || !Number.isFinite(n) || (kind === 'int' && !Number.isInteger(n))) {
    throw new ConfigError(
      `invalid environment variable ${name}=${JSON.stringify(raw)}: ` +
        `expected ${kind === 'int' ? 'an integer' : 'a number'} in decimal`,
    );
  }
  return n;
}

/** The YAML parser, loaded only when a YAML file is read: every command and service start pays for it otherwise. */
function parseYaml(text: string): unknown {
  const yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  const doc = yaml.parseDocument(text);
  // A warning (an unknown tag such as !!js/function) would load the value as something else.
  const problem = doc.errors[0] ?? doc.warnings[0];
  if (problem) throw problem;
  return doc.toJS();
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      `config file ${path} is not valid ${/\.ya?ml$/i.test(path) ? 'YAML' : 'JSON'}: ${(err as Error).message}`,
    );
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(`config file ${path} must hold an object`);
  return data as Record<string, unknown>;
}

/** Load config from an optional file and the environment. Throws ConfigError naming the field. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Record<string, unknown> = {}): Config {
  const raw: Record<string, unknown> = env.DEEPQ_CONFIG ? readConfigFile(env.DEEPQ_CONFIG) : {};
  const source: string[] = [];
  for (const [name, spec] of Object.entries(ENV_MAP)) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    setPath(raw, spec.path, parseEnvValue(name, value, spec.kind));
    source.push(name);
  }
  Object.assign(raw, overrides);
  // The default blob dir follows the environment given (XDG_STATE_HOME, HOME), not the process's.
  const vfs = (raw.vfs ?? {}) as Record<string, unknown>;
  if (vfs.blobDir === undefined) raw.vfs = { ...vfs, blobDir: defaultBlobDir(env) };
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const where = env.DEEPQ_CONFIG ? ` (file ${env.DEEPQ_CONFIG} and environment)` : '';
    throw new ConfigError(`invalid config${where}: ${formatZodIssues(parsed.error, envNameOf(env))}`);
  }
  const cfg = parsed.data;
  const { modelProvider, providerNotice } = chooseModelProvider(cfg);
  // The scripted model is not a priced model: unless models are set explicitly, its usage is
  // booked under its own ids (agents' own models dropped), so `deepq status` never shows a
  // cost for canned output.
  const scriptedIds = modelProvider === 'scripted' && raw.models === undefined;
  const models = scriptedIds ? { HIGH: 'scripted-high', LOW: 'scripted-low' } : cfg.models;
  const agents = scriptedIds ? withoutOwnModels(cfg) : {};
  const providerEnv = providerEnvValues(cfg.providers, env);
  const envNotice = unknownEnvNotice(env, CONFIG_ENV_NAMES, JSON.stringify(raw));
  return { ...cfg, ...agents, models, modelProvider, providerNotice, providerEnv, envNotice };
}

/** The environment variable that set a config path, if one did. */
function envNameOf(env: NodeJS.ProcessEnv): (path: string) => string | undefined {
  return (path) => Object.keys(ENV_MAP).find((k) => env[k] !== undefined && ENV_MAP[k]!.path.join('.') === path);
}

type ParsedConfig = z.infer<typeof ConfigSchema>;

/**
 * `DEEPQ_MODEL_PROVIDER`: `scripted` answers every call offline; `anthropic` calls the real
 * providers. Unset: the real ones when ANTHROPIC_API_KEY is set or no model is on anthropic.
 */
function chooseModelProvider(cfg: ParsedConfig): Pick<Config, 'modelProvider' | 'providerNotice'> {
  const needsKey = usedProviders(cfg).includes('anthropic');
  let providerNotice: string | undefined;
  let modelProvider = cfg.modelProvider;
  if (!modelProvider) {
    modelProvider = cfg.anthropicApiKey || !needsKey ? 'anthropic' : 'scripted';
    providerNotice = cfg.anthropicApiKey
      ? 'deepq: DEEPQ_MODEL_PROVIDER unset and ANTHROPIC_API_KEY found: using the anthropic provider'
      : needsKey
        ? 'deepq: no ANTHROPIC_API_KEY: using the offline scripted model (canned outputs, not a real LLM)'
        : 'deepq: DEEPQ_MODEL_PROVIDER unset and no model is on anthropic: using the configured providers';
  }
  // The key itself is checked where a provider is built (a service's start): the CLI needs none.
  return { modelProvider, providerNotice };
}

/** Roles, planner and reflector without their own `model`: every call goes by tier. */
function withoutOwnModels(cfg: ParsedConfig): Pick<ParsedConfig, 'roles' | 'planner' | 'reflector'> {
  const drop = <T extends { model?: string }>({ model: _model, ...rest }: T) => rest as T;
  return { roles: cfg.roles.map(drop), planner: drop(cfg.planner), reflector: drop(cfg.reflector) };
}

export function roleNames(cfg: Config): string[] {
  return cfg.roles.map((r) => r.name);
}

/** Redacts the password in a Redis URL for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparseable url>';
  }
}

/**
 * The bounds every store of a goal's keys applies: the backstop TTL, the timeline's length, and
 * how long a finished goal's keys must last (its retention and two sweeps, which remove it).
 */
export function goalKeyLimits(cfg: Config): {
  keyTtlSeconds: number;
  eventsMaxLen: number;
  keptAfterEndSeconds: number;
} {
  return {
    keyTtlSeconds: cfg.goalKeyTtlSeconds,
    eventsMaxLen: cfg.eventsMaxLen,
    keptAfterEndSeconds: cfg.retentionSeconds + 2 * cfg.sweepIntervalSeconds,
  };
}
