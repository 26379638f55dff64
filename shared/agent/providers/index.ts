import type { Config } from '../../runtime/config.ts';
import { AnthropicProvider } from './anthropic.ts';
import { ScriptedProvider } from './scripted.ts';
import type { ModelProvider } from './types.ts';

export function createProvider(cfg: Config): ModelProvider {
  if (cfg.modelProvider === 'anthropic') {
    return new AnthropicProvider({
      apiKey: cfg.anthropicApiKey!,
      baseURL: cfg.anthropicBaseUrl,
      timeoutMs: cfg.modelTimeoutMs,
    });
  }
  return new ScriptedProvider({ latencyMs: cfg.scriptedLatencyMs, roles: cfg.roles, fanout: cfg.scriptedFanout });
}

export * from './types.ts';
