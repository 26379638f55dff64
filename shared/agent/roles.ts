// Built-in agent definitions. A role is data: prompt, tools, middleware, tier, limits and
// output contract. Adding a role is a config entry plus `deepq worker --role <name>`.
import { z } from 'zod';
import { SandboxSchema } from './sandbox/config.ts';

/** The built-in virtual-FS tools (shared/agent/tools.ts). */
export const TOOL_NAMES = ['read_file', 'write_file', 'edit_file', 'list_files', 'grep', 'delete_file'] as const;
/** Built-in tools that run code in the role's sandbox (shared/agent/sandbox/). */
export const SANDBOX_TOOL_NAMES = ['run_code', 'run_tests'] as const;
const BUILT_IN_TOOLS: readonly string[] = [...TOOL_NAMES, ...SANDBOX_TOOL_NAMES];
/** `mcp:<server>/<tool>` or `mcp:<server>/*`: a tool (or every tool) of a configured MCP server. */
export const MCP_TOOL_RE = /^mcp:([a-z0-9][a-z0-9_-]{0,40})\/(\*|[A-Za-z0-9_.-]{1,64})$/;
export const ToolNameSchema = z.string().superRefine((name, ctx) => {
  if (BUILT_IN_TOOLS.includes(name) || MCP_TOOL_RE.test(name)) return;
  const builtIn = BUILT_IN_TOOLS.join(', ');
  const message = `unknown tool ${JSON.stringify(name)} (built-in: ${builtIn}; or mcp:<server>/<tool>)`;
  ctx.addIssue({ code: 'custom', message });
});
export const MIDDLEWARE_NAMES = ['logging', 'tokens', 'tier-routing', 'retry', 'prompt-cache'] as const;
export const ROLE_CONTRACTS = ['summary', 'code', 'critique', 'text'] as const;
export type RoleContract = (typeof ROLE_CONTRACTS)[number];
/** Role contracts, plus the planner's and the reflector's own. */
export const CONTRACT_NAMES = [...ROLE_CONTRACTS, 'plan', 'reflection'] as const;

export const RoleNameSchema = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,40}$/, 'role names are lower-case letters, digits and dashes (max 41 chars)');

const REQUIRED_MIDDLEWARE = ['tier-routing', 'tokens'] as const;

/** An agent's effort levels: the ones both model APIs take. */
export const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'] as const;

/** An agent's output tokens per call unless its config says otherwise. */
export const DEFAULT_MAX_TOKENS = 4096;

/** An agent's fields as a config writes them, without defaults. */
const agentFields = {
  systemPrompt: z.string().min(1),
  tools: z.array(ToolNameSchema),
  // Optional layers may go; these two may not: without tier-routing no call finds its model, and
  // without tokens a role's calls ignore the goal's budgets and book no usage, in silence.
  middleware: z.array(z.enum(MIDDLEWARE_NAMES)).refine((m) => REQUIRED_MIDDLEWARE.every((r) => m.includes(r)), {
    message: `must list ${REQUIRED_MIDDLEWARE.join(' and ')} (model routing, budgets and usage)`,
  }),
  tier: z.enum(['HIGH', 'LOW']),
  /** Its own model (`<provider>:<id>`, a bare id meaning anthropic), overriding its tier's. */
  model: z.string().min(1),
  maxTurns: z.number().int().min(1).max(200),
  maxTokens: z.number().int().min(16).max(64000),
  contract: z.enum(CONTRACT_NAMES),
  /**
   * Extended thinking on Anthropic models: `adaptive` lets the model decide how much, `enabled`
   * gives it a budget of its output tokens (at least 1024, under maxTokens), `disabled` asks for
   * none. Unset: the model's own default. Providers of type openai ignore it.
   */
  thinking: z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('enabled'), budgetTokens: z.number().int().min(1024).max(63999) }),
    z.strictObject({ type: z.literal('adaptive') }),
    z.strictObject({ type: z.literal('disabled') }),
  ]),
  /**
   * How much effort the model puts into an answer (its thinking, its tool calls, its length):
   * Anthropic's `output_config.effort`, OpenAI's `reasoning_effort`. Unset: the model's default.
   * A model that does not take it refuses the request, naming the parameter.
   */
  effort: z.enum(EFFORTS),
};

// Strict: a misspelt key (`approvals` for `approval`) is an error naming it, not a field dropped
// in silence (that typo ran a gated tool without asking anyone).
export const AgentSpecSchema = z.strictObject({
  ...agentFields,
  tools: agentFields.tools.default([]),
  middleware: agentFields.middleware.default([...MIDDLEWARE_NAMES]),
  tier: agentFields.tier.default('HIGH'),
  model: agentFields.model.optional(),
  maxTurns: agentFields.maxTurns.default(30),
  maxTokens: agentFields.maxTokens.default(DEFAULT_MAX_TOKENS),
  contract: agentFields.contract.default('text'),
  thinking: agentFields.thinking.optional(),
  effort: agentFields.effort.optional(),
});
/**
 * The planner's or the reflector's section: only the fields the config sets. (With the agent
 * defaults filled in, `reflector: {maxTokens: 2000}` moved the reflector to the HIGH tier.)
 */
export const AgentOverridesSchema = z.strictObject(agentFields).partial();
export type AgentSpec = z.infer<typeof AgentSpecSchema>;
export type ThinkingSpec = NonNullable<AgentSpec['thinking']>;

/** A thinking budget must leave the answer some of the agent's output tokens. */
export function thinkingProblem(spec: { thinking?: ThinkingSpec; maxTokens: number }): string | null {
  const t = spec.thinking;
  if (t?.type !== 'enabled' || t.budgetTokens < spec.maxTokens) return null;
  return `budgetTokens (${t.budgetTokens}) must be less than maxTokens (${spec.maxTokens}): thinking counts in them`;
}

export const RoleSpecSchema = AgentSpecSchema.extend({
  name: RoleNameSchema,
  contract: z.enum(ROLE_CONTRACTS).default('text'),
  /** Fleet-wide cap on jobs of this role running at once (BullMQ global concurrency). */
  fleetConcurrency: z.number().int().min(1).optional(),
  /**
   * Tools whose calls wait for a human's approval (`deepq approve|reject`): built-in names,
   * `mcp:<server>/<tool>` or `mcp:<server>/*`.
   */
  approval: z.array(ToolNameSchema).default([]),
  /** Where and within what limits run_code / run_tests run (shared/agent/sandbox/). */
  sandbox: SandboxSchema.prefault({}),
});
export type RoleSpec = z.infer<typeof RoleSpecSchema>;

const SUBAGENT_MIDDLEWARE = ['logging', 'tokens', 'tier-routing', 'retry', 'prompt-cache'] as const;

export const DEFAULT_ROLES: z.input<typeof RoleSpecSchema>[] = [
  {
    name: 'research-specialist',
    systemPrompt:
      'You are a research specialist. Given an instruction and reference files, produce a ' +
      'fact-dense summary with inline citations. Return ONLY the summary. Do NOT plan, ' +
      'delegate, or ask questions.',
    tools: ['read_file', 'list_files', 'grep'],
    middleware: [...SUBAGENT_MIDDLEWARE],
    tier: 'LOW',
    contract: 'summary',
  },
  {
    name: 'code-writer',
    systemPrompt:
      'You are a code writer. Given a spec, produce runnable code. Return ONLY code in one ' +
      'fenced block. Do NOT explain or plan.',
    tools: ['read_file', 'list_files', 'write_file', 'edit_file', 'grep'],
    middleware: [...SUBAGENT_MIDDLEWARE],
    tier: 'HIGH',
    contract: 'code',
  },
  {
    name: 'critic',
    systemPrompt:
      'You are a critic. Given an artifact and a spec, list concrete defects as JSON: ' +
      '[{"line": int, "issue": str, "severity": str}]. Return ONLY the JSON. Do NOT rewrite ' +
      'the artifact.',
    tools: ['read_file', 'list_files', 'grep'],
    middleware: [...SUBAGENT_MIDDLEWARE],
    tier: 'LOW',
    contract: 'critique',
  },
];

/**
 * The planner's and the reflector's spec: their own prompt, tier and contract, no tools, one
 * turn, the full middleware stack; the config's `planner` / `reflector` section overrides it.
 */
export function coordinatorSpec(
  base: Pick<AgentSpec, 'systemPrompt' | 'tier' | 'contract'>,
  overrides: Partial<AgentSpec>,
): AgentSpec {
  return AgentSpecSchema.parse({ ...base, tools: [], maxTurns: 1, middleware: [...MIDDLEWARE_NAMES], ...overrides });
}

type RawEntry = Record<string, unknown>;
const isEntry = (v: unknown): v is RawEntry => typeof v === 'object' && v !== null && !Array.isArray(v);
const isOverride = (v: unknown): v is RawEntry => isEntry(v) && v.systemPrompt === undefined;

/**
 * A config's `roles` list as the role set, before validation. An entry without `systemPrompt`
 * overrides the default role it names (the default's other fields stay). A list of overrides
 * only keeps the defaults it does not name, after the listed ones (so a field's path in an error
 * is its place in the file); a list with any full entry is the whole role set, as before.
 */
export function resolveRoleOverrides(value: unknown, addIssue: (index: number, message: string) => void): unknown {
  if (value === undefined) return DEFAULT_ROLES;
  if (!Array.isArray(value)) return value;
  const byName = new Map(DEFAULT_ROLES.map((r) => [r.name, r]));
  const merged = value.map((entry, i) => {
    if (!isOverride(entry)) return entry;
    const base = typeof entry.name === 'string' ? byName.get(entry.name) : undefined;
    if (base) return { ...base, ...entry };
    const known = [...byName.keys()].join(', ');
    addIssue(
      i,
      `role ${JSON.stringify(entry.name)} has no systemPrompt and is not a default role (${known}): ` +
        'an entry without systemPrompt overrides the default role of its name',
    );
    return entry;
  });
  // An empty list stays one (refused: deepq needs roles), not the defaults.
  if (!value.length || !value.every(isOverride)) return merged;
  const named = new Set(value.map((e) => e.name));
  return [...merged, ...DEFAULT_ROLES.filter((r) => !named.has(r.name))];
}
