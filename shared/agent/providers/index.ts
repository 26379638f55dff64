// The model provider a process uses, from config: a router over the providers its models
// name (`anthropic` predefined, others under `providers`), or the scripted model for all.
import { ConfigError } from '../../errors.ts';
import type { Config } from '../../runtime/config.ts';
import { AnthropicProvider } from './anthropic.ts';
import { configuredModels } from './model-labels.ts';
import { DEFAULT_PROVIDER } from './model-ref.ts';
import { OpenAIProvider } from './openai.ts';
import { ProviderRouter } from './router.ts';
import { ScriptedProvider } from './scripted.ts';
import { type ProviderConfig, usedProviders } from './settings.ts';
import type { ModelProvider } from './types.ts';

export interface ProviderHooks {
  /** A provider's endpoint reported no usage: deepq estimates it from then on (said once per provider). */
  onEstimatedUsage?: (provider: string, model: string) => void;
}

export function createProvider(cfg: Config, hooks: ProviderHooks = {}): ModelProvider {
  const configured = configuredModels(cfg);
  if (cfg.modelProvider === 'scripted') {
    const scripted = new ScriptedProvider({
      latencyMs: cfg.scriptedLatencyMs,
      roles: cfg.roles,
      fanout: cfg.scriptedFanout,
    });
    return new ProviderRouter(new Map(), configured, scripted);
  }
  const backends = new Map(usedProviders(cfg).map((name) => [name, buildProvider(cfg, name, hooks)]));
  return new ProviderRouter(backends, configured);
}

function buildProvider(cfg: Config, name: string, hooks: ProviderHooks): ModelProvider {
  if (name === DEFAULT_PROVIDER) {
    if (!cfg.anthropicApiKey) {
      throw new ConfigError(
        'invalid config: anthropicApiKey (ANTHROPIC_API_KEY) is required when DEEPQ_MODEL_PROVIDER=anthropic',
      );
    }
    return new AnthropicProvider({
      apiKey: cfg.anthropicApiKey,
      baseURL: cfg.anthropicBaseUrl,
      timeoutMs: cfg.modelTimeoutMs,
      maxCallMs: cfg.modelMaxCallMs,
      onEstimatedUsage: hooks.onEstimatedUsage,
    });
  }
  const p = cfg.providers[name]!;
  const resolved = { apiKey: apiKeyOf(cfg, name, p), headers: headersOf(cfg, name, p) };
  const common = {
    ...resolved,
    timeoutMs: p.timeoutMs ?? cfg.modelTimeoutMs,
    maxCallMs: p.maxCallMs ?? cfg.modelMaxCallMs,
    stream: p.stream,
    maxRetries: p.maxRetries,
  };
  if (p.type === 'anthropic') {
    if (!common.apiKey) throw new ConfigError(`providers.${name}.apiKeyEnv: an anthropic provider needs an API key`);
    return new AnthropicProvider({
      ...common,
      apiKey: common.apiKey,
      baseURL: p.baseURL,
      onEstimatedUsage: hooks.onEstimatedUsage,
    });
  }
  const opts = { ...common, baseURL: p.baseURL, maxTokensParam: p.maxTokensParam };
  return new OpenAIProvider({ name, ...opts, onEstimatedUsage: hooks.onEstimatedUsage });
}

function envValue(cfg: Config, variable: string, field: string, name: string): string {
  const value = cfg.providerEnv[variable];
  if (!value)
    throw new ConfigError(`${field}: environment variable ${variable} is not set (provider "${name}" needs it)`);
  return value;
}

function apiKeyOf(cfg: Config, name: string, p: ProviderConfig): string | undefined {
  return p.apiKeyEnv ? envValue(cfg, p.apiKeyEnv, `providers.${name}.apiKeyEnv`, name) : undefined;
}

function headersOf(cfg: Config, name: string, p: ProviderConfig): Record<string, string> {
  return Object.fromEntries(
    Object.entries(p.headers).map(([k, v]) => [
      k,
      typeof v === 'string' ? v : envValue(cfg, v.env, `providers.${name}.headers.${k}`, name),
    ]),
  );
}

export * from './types.ts';
