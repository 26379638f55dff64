// The Redis side of a process: stores, lifecycle, approvals, virtual FS and queues. Apart from
// runtime.ts so that the CLI (cli/goal-client.ts) loads no model SDK, logger or metrics.
import type { Redis } from 'ioredis';
import { ApprovalStore } from '../goal/approvals.ts';
import { GoalLifecycle } from '../goal/lifecycle.ts';
import { isTerminal } from '../goal/status.ts';
import { GoalStore } from '../goal/store.ts';
import { DirBlobStore } from '../vfs/blob-store.ts';
import { type VfsObserver, VirtualFs } from '../vfs/vfs.ts';
import type { Config } from './config.ts';
import type { Metrics } from './metrics.ts';
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

export function openState(
  cfg: Config,
  name: string,
  hooks: { metrics?: Metrics; vfs?: VfsObserver; redis?: Redis } = {},
): State {
  // No auto-pipelining: each batch it makes is an ioredis Pipeline, which copies every defined
  // script onto itself; that cost 12-15 % of a service's CPU at zero model latency (bench).
  const redis = hooks.redis ?? createRedis(cfg.redisUrl, `deepq:${name}`);
  const bull = createRedis(cfg.redisUrl, `deepq:${name}:bull`);
  const limits = { keyTtlSeconds: cfg.goalKeyTtlSeconds, eventsMaxLen: cfg.eventsMaxLen };
  const goals = new GoalStore(redis, cfg.prefix, limits);
  const metrics = hooks.metrics;
  const onStatus = metrics ? countedStatus(metrics) : undefined;
  const lifecycle = new GoalLifecycle(redis, goals.keys, {
    ...limits,
    onStatus,
    ...(metrics
      ? {
          onTerminal: (status, cycles) => metrics.goalCycles.observe({ status }, cycles),
          onBudget: (kind, action) => metrics.budgetEvents.inc({ kind, action }),
        }
      : {}),
  });
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
