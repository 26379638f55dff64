// What every process needs, built once from the config: Redis, stores, queues, the model
// provider, metrics and a logger. Services and the CLI wire on top of this.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { redactUrl } from './config.ts';
import { createRedis } from './redis.ts';
import { GoalStore } from '../goal/store.ts';
import { VirtualFs } from '../vfs/vfs.ts';
import { DirBlobStore } from '../vfs/blob-store.ts';
import { Queues } from './queues.ts';
import { Metrics } from './metrics.ts';
import { createLogger } from './logger.ts';
import { createProvider, type ModelProvider } from '../agent/providers/index.ts';

export interface Runtime {
  cfg: Config;
  /** deepq's own state (goals, files, events). */
  redis: Redis;
  /** BullMQ's connection. Kept apart: BullMQ defines ~50 scripts on its client, and ioredis
   *  copies every defined script into each pipeline/multi made on that client. */
  bull: Redis;
  goals: GoalStore;
  vfs: VirtualFs;
  queues: Queues;
  metrics: Metrics;
  logger: Logger;
  provider: ModelProvider;
  secrets: string[];
  close(): Promise<void>;
}

export function secretsOf(cfg: Config): string[] {
  const out: string[] = [];
  if (cfg.anthropicApiKey) out.push(cfg.anthropicApiKey);
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
  const redis = createRedis(cfg.redisUrl, `deepq:${service}`, { autoPipelining: true });
  const bull = createRedis(cfg.redisUrl, `deepq:${service}:bull`);
  const metrics = new Metrics({ service });
  const goals = new GoalStore(redis, cfg.prefix, { keyTtlSeconds: cfg.goalKeyTtlSeconds, eventsMaxLen: cfg.eventsMaxLen });
  const vfs = new VirtualFs(redis, cfg.prefix, new DirBlobStore(cfg.vfs.blobDir, cfg.prefix), {
    ...cfg.vfs,
    keyTtlSeconds: cfg.goalKeyTtlSeconds,
    eventsMaxLen: cfg.eventsMaxLen,
  }, {
    onEvicted: (reason, n) => metrics.vfsEvictions.inc({ reason }, n),
    onWrite: (bytes, spilled) => metrics.vfsWritten.inc({ storage: spilled ? 'spilled' : 'inline' }, bytes),
  });
  const queues = new Queues(bull, cfg);
  const provider = createProvider(cfg);
  logger.debug({ redis: redactUrl(cfg.redisUrl), prefix: cfg.prefix, provider: provider.name }, 'runtime ready');
  return {
    cfg, redis, bull, goals, vfs, queues, metrics, logger, provider, secrets,
    async close() {
      await queues.close();
      redis.disconnect();
      bull.disconnect();
    },
  };
}
