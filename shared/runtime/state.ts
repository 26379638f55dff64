// The Redis side of a process: stores, lifecycle, approvals, virtual FS and queues. Apart from
// runtime.ts so that the CLI (cli/goal-client.ts) loads no model SDK, logger or metrics.
import type { Redis } from 'ioredis';
import { GoalLifecycle } from '../goal/lifecycle.ts';
import { isTerminal } from '../goal/status.ts';
import type { VfsObserver } from '../vfs/vfs.ts';
import { type Config, goalKeyLimits } from './config.ts';
import type { Metrics } from './metrics.ts';
import { Queues } from './queues.ts';
import { createRedis } from './redis.ts';
import { openStores, type Stores } from './stores.ts';

export interface State extends Stores {
  cfg: Config;
  /** BullMQ's connection. Kept apart: BullMQ defines ~50 scripts on its client, and ioredis
   *  copies every defined script into each pipeline/multi made on that client. */
  bull: Redis;
  lifecycle: GoalLifecycle;
  queues: Queues;
  close(): Promise<void>;
}

export function openState(
  cfg: Config,
  name: string,
  hooks: { metrics?: Metrics; vfs?: VfsObserver; redis?: Redis; failFast?: boolean } = {},
): State {
  // No auto-pipelining: each batch it makes is an ioredis Pipeline, which copies every defined
  // script onto itself; that cost 12-15 % of a service's CPU at zero model latency (bench).
  const redis = hooks.redis ?? createRedis(cfg.redisUrl, `deepq:${name}`);
  const bull = createRedis(cfg.redisUrl, `deepq:${name}:bull`, { scripts: false, failFast: hooks.failFast });
  const stores = openStores(cfg, redis, hooks.vfs);
  const metrics = hooks.metrics;
  const onStatus = metrics ? countedStatus(metrics) : undefined;
  const lifecycle = new GoalLifecycle(redis, stores.goals.keys, {
    ...goalKeyLimits(cfg),
    onStatus,
    ...(metrics
      ? {
          onTerminal: (status, cycles) => metrics.goalCycles.observe({ status }, cycles),
          onBudget: (kind, action) => metrics.budgetEvents.inc({ kind, action }),
        }
      : {}),
  });
  const queues = new Queues(bull, cfg);
  return {
    ...stores,
    cfg,
    bull,
    lifecycle,
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
