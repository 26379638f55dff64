// The `providers` section of the config: each named endpoint beyond the predefined
// `anthropic`, the model refs that use them, and the environment values they read (API keys,
// header values), taken when the config is loaded so that only the processes that call a
// provider need them (createProvider checks).
import { z } from 'zod';
import { timerMs } from '../../zod.ts';
import { DEFAULT_PROVIDER, modelRefProblem, modelRefSites, parseModelRef } from './model-ref.ts';
import { callTimeouts } from './sdk-errors.ts';

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name');
/** A literal value, or `{ env: NAME }`: taken from the environment at start (secrets stay out of files). */
const ValueOrEnv = z.union([z.string(), z.object({ env: EnvName }).strict()]);

const common = {
  /** The variable holding the API key (none: servers that need no key get a placeholder). */
  apiKeyEnv: EnvName.optional(),
  headers: z.record(z.string(), ValueOrEnv).default({}),
  /** Longest wait for the model's next output (a whole answer when not streamed); default DEEPQ_MODEL_TIMEOUT_MS. */
  timeoutMs: timerMs().optional(),
  /** A streamed answer's whole-call limit; default DEEPQ_MODEL_MAX_CALL_MS. */
  maxCallMs: timerMs().optional(),
  /** The SDK's own retries: keep 0 while the roles' middleware has `retry` (it honours retry-after). */
  maxRetries: z.number().int().min(0).max(10).default(0),
};

export const ProviderSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('openai'),
      baseURL: z.string().url().default('https://api.openai.com/v1'),
      maxTokensParam: z.enum(['max_tokens', 'max_completion_tokens']).default('max_tokens'),
      /** Streamed answers (with `stream_options.include_usage`); false for a server that cannot stream. */
      stream: z.boolean().default(true),
      ...common,
    })
    .strict(),
  z
    .object({
      type: z.literal('anthropic'),
      baseURL: z.string().url().optional(),
      /** Streamed answers; false for a gateway that only answers whole. */
      stream: z.boolean().default(true),
      ...common,
    })
    .strict(),
]);
export type ProviderConfig = z.infer<typeof ProviderSchema>;

/** Whether a provider's answers are streamed (the predefined `anthropic`'s are). */
export const streams = (p: ProviderConfig | undefined) => p === undefined || p.stream;

/**
 * The longest one call to a provider may take (`undefined`: the predefined `anthropic`): a streamed
 * answer's whole-call limit, or the timeout of an answer sent whole.
 */
export function longestCallMs(
  cfg: { modelTimeoutMs: number; modelMaxCallMs: number },
  p: ProviderConfig | undefined,
): number {
  const timeoutMs = p?.timeoutMs ?? cfg.modelTimeoutMs;
  return callTimeouts({ timeoutMs, maxCallMs: p?.maxCallMs ?? cfg.modelMaxCallMs, stream: streams(p) }).maxMs;
}

/** Names are checked by providerIssues (a record key's own message does not reach the user). */
export const ProvidersSchema = z.record(z.string(), ProviderSchema).default({});
const PROVIDER_NAME = /^[a-z][a-z0-9_-]{0,40}$/;

type ModelSites = Parameters<typeof modelRefSites>[0];

/** Config issues: a redefined `anthropic`, and model refs naming a provider that is not configured. */
export function providerIssues(
  cfg: ModelSites & { providers: Record<string, ProviderConfig> },
): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  if (cfg.providers[DEFAULT_PROVIDER]) {
    const message = 'anthropic is predefined (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL): give this provider another name';
    issues.push({ path: ['providers', DEFAULT_PROVIDER], message });
  }
  const names = Object.keys(cfg.providers).filter((n) => n !== DEFAULT_PROVIDER);
  for (const name of names.filter((n) => !PROVIDER_NAME.test(n))) {
    const message = 'provider names are a-z, 0-9, _ and - (a letter first, at most 41)';
    issues.push({ path: ['providers', name], message });
  }
  for (const site of modelRefSites(cfg)) {
    const message = modelRefProblem(site.ref, names);
    if (message) issues.push({ path: site.path, message });
  }
  return issues;
}

/** The providers the config's models use, `anthropic` included when a model is bare or anthropic:. */
export function usedProviders(cfg: ModelSites): string[] {
  return [...new Set(modelRefSites(cfg).map((s) => parseModelRef(s.ref).provider))];
}

/** The environment values the providers name (set and non-empty ones only). */
export function providerEnvValues(
  providers: Record<string, ProviderConfig>,
  env: NodeJS.ProcessEnv,
): Record<string, string> {
  const names = Object.values(providers).flatMap((p) => [
    ...(p.apiKeyEnv ? [p.apiKeyEnv] : []),
    ...Object.values(p.headers).flatMap((v) => (typeof v === 'string' ? [] : [v.env])),
  ]);
  return Object.fromEntries(names.filter((n) => env[n]).map((n) => [n, env[n]!]));
}
