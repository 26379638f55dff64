// What every process needs, built once from the config. `openState` (state.ts) is the Redis side
// (stores, lifecycle, queues), all the CLI needs; `createRuntime` adds the model provider,
// metrics and a logger for the services.
import type { Logger } from 'pino';
import { secretForms } from '../agent/mcp/resolve.ts';
import { createProvider, type ModelProvider } from '../agent/providers/index.ts';
import { type Config, redactUrl } from './config.ts';
import { createLogger } from './logger.ts';
import { Metrics } from './metrics.ts';
import { closedHint, WRONG_DATABASE } from './redis-hints.ts';
import { openState, type State } from './state.ts';

export { openState, type State };

export interface Runtime extends State {
  metrics: Metrics;
  logger: Logger;
  provider: ModelProvider;
  secrets: string[];
}

export function secretsOf(cfg: Config): string[] {
  const out: string[] = [];
  if (cfg.anthropicApiKey) out.push(cfg.anthropicApiKey);
  for (const value of Object.values(cfg.providerEnv ?? {})) out.push(...secretForms(value));
  try {
    const pw = new URL(cfg.redisUrl).password;
    if (pw) out.push(decodeURIComponent(pw), pw);
  } catch {
    /* validated by the config schema */
  }
  return out;
}

export function createRuntime(cfg: Config, service: string): Runtime {
  const secrets = secretsOf(cfg);
  const logger = createLogger(cfg.logLevel, { service }, secrets);
  const metrics = new Metrics({ service });
  const state = openState(cfg, service, {
    metrics,
    vfs: {
      onEvicted: (reason, n) => metrics.vfsEvictions.inc({ reason }, n),
      onWrite: (bytes, spilled) => metrics.vfsWritten.inc({ storage: spilled ? 'spilled' : 'inline' }, bytes),
    },
  });
  const provider = createProvider(cfg, {
    onEstimatedUsage: (name, model) =>
      logger.warn({ provider: name, model }, 'the endpoint reports no token usage: deepq estimates it (flagged)'),
  });
  logger.debug({ redis: redactUrl(cfg.redisUrl), prefix: cfg.prefix, provider: provider.name }, 'runtime ready');
  logRedisTrouble(state.redis, logger, cfg.redisUrl);
  return { ...state, metrics, logger, provider, secrets };
}

const LOG_EVERY_MS = 30_000;

/**
 * A service whose Redis is away (down, unreachable, at its maxclients) says so while it retries,
 * at most once per 30 s (with how many errors came between), naming the likely cause of a closed
 * connection; and says when Redis is back. Without it a service waited in silence, its /readyz
 * only saying `redis: false`.
 */
function logRedisTrouble(redis: State['redis'], logger: Logger, url: string): void {
  let last = { at: 0, repeats: 0 };
  redis.on('error', (err: Error) => {
    // Not retried: the process stops, saying why (redis.ts).
    if (WRONG_DATABASE.test(err.message)) return;
    const now = Date.now();
    if (last.at && now - last.at < LOG_EVERY_MS) {
      last.repeats++;
      return;
    }
    const message = `${err.message}${closedHint(err.message)}`;
    const repeated = last.repeats ? { repeated: last.repeats } : {};
    logger.error({ redis: redactUrl(url), err: { message }, ...repeated }, 'cannot reach Redis; retrying');
    last = { at: now, repeats: 0 };
  });
  redis.on('ready', () => {
    if (last.at) logger.info({ redis: redactUrl(url) }, 'Redis reachable again');
    last = { at: 0, repeats: 0 };
  });
}
