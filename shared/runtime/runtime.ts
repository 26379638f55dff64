// What every process needs, built once from the config. `openState` is the Redis side
// (stores, lifecycle, queues), all the CLI needs; `createRuntime` adds the model provider,
// metrics and a logger for the services.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createProvider, type ModelProvider } from '../agent/providers/index.ts';
import { ApprovalStore } from '../goal/approvals.ts';
import { GoalLifecycle } from '../goal/lifecycle.ts';
import { isTerminal } from '../goal/status.ts';
import { GoalStore } from '../goal/store.ts';
import { DirBlobStore } from '../vfs/blob-store.ts';
import { type VfsObserver, VirtualFs } from '../vfs/vfs.ts';
import { type Config, redactUrl } from './config.ts';
import { createLogger } from './logger.ts';
import { Metrics } from './metrics.ts';
import { Queues } from './queues.ts';
import { createRedis } from './redis.ts';

export interface State {
  cfg: Config;
  /** deepq's own state (goals, files, events). */
  redis: Redis;
  /** BullMQ's connection. Kept apart: BullMQ defines ~50 scripts on its client, and ioredis
   *  copies every defined script into each pipeline/multi made on that client. */
  bull: Redis;
  goals: GoalStore;
  lifecycle: GoalLifecycle;
  /** Human approvals of risky tool calls, and paused jobs' checkpoints. */
  approvals: ApprovalStore;
  vfs: VirtualFs;
  queues: Queues;
  close(): Promise<void>;
}

export interface Runtime extends State {
  metrics: Metrics;
  logger: Logger;
  provider: ModelProvider;
  secrets: string[];
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

export function openState(
  cfg: Config,
  name: string,
  hooks: { metrics?: Metrics; vfs?: VfsObserver; redis?: Redis } = {},
): State {
  const redis = hooks.redis ?? createRedis(cfg.redisUrl, `deepq:${name}`, { autoPipelining: true });
  const bull = createRedis(cfg.redisUrl, `deepq:${name}:bull`);
  const limits = { keyTtlSeconds: cfg.goalKeyTtlSeconds, eventsMaxLen: cfg.eventsMaxLen };
  const goals = new GoalStore(redis, cfg.prefix, limits);
  const metrics = hooks.metrics;
  const onStatus = metrics ? countedStatus(metrics) : undefined;
  const lifecycle = new GoalLifecycle(redis, goals.keys, { ...limits, onStatus });
  const approvals = new ApprovalStore(redis, goals.keys, limits);
  const blobs = new DirBlobStore(cfg.vfs.blobDir, cfg.prefix);
  const vfs = new VirtualFs(redis, cfg.prefix, blobs, { ...cfg.vfs, ...limits }, hooks.vfs);
  const queues = new Queues(bull, cfg);
  return {
    cfg,
    redis,
    bull,
    goals,
    lifecycle,
    approvals,
    vfs,
    queues,
    async close() {
      await queues.close();
      redis.disconnect();
      bull.disconnect();
    },
  };
}

/** deepq_goals_total counts goals reaching a terminal status or awaiting a human. */
function countedStatus(metrics: Metrics) {
  return (status: string) => {
    if (isTerminal(status) || status === 'awaiting_human') metrics.goals.inc({ status });
  };
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
  const provider = createProvider(cfg);
  logger.debug({ redis: redactUrl(cfg.redisUrl), prefix: cfg.prefix, provider: provider.name }, 'runtime ready');
  return { ...state, metrics, logger, provider, secrets };
}
