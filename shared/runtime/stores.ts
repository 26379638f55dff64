// The stores of a process's Redis side that need no queue: goals, approvals and the virtual
// FS. Apart from state.ts (which adds the lifecycle's metrics hooks and BullMQ's queues) so
// that a read-only command (`deepq status`) loads no BullMQ.
import type { Redis } from 'ioredis';
import { ApprovalStore } from '../goal/approvals.ts';
import { GoalStore } from '../goal/store.ts';
import { DirBlobStore } from '../vfs/blob-store.ts';
import { type VfsObserver, VirtualFs } from '../vfs/vfs.ts';
import { type Config, goalKeyLimits } from './config.ts';

export interface Stores {
  redis: Redis;
  goals: GoalStore;
  /** Human approvals of risky tool calls, and paused jobs' checkpoints. */
  approvals: ApprovalStore;
  vfs: VirtualFs;
}

export function openStores(cfg: Config, redis: Redis, vfsObserver?: VfsObserver): Stores {
  const limits = goalKeyLimits(cfg);
  const goals = new GoalStore(redis, cfg.prefix, limits);
  const approvals = new ApprovalStore(redis, goals.keys, limits);
  const blobs = new DirBlobStore(cfg.vfs.blobDir, cfg.prefix);
  const vfs = new VirtualFs(redis, cfg.prefix, blobs, { ...cfg.vfs, ...limits }, vfsObserver);
  return { redis, goals, approvals, vfs };
}
