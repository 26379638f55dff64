// A lease on one run of a fleet-wide chore. BullMQ's job schedulers queue a schedule's next run
// when the current one starts, so a run longer than its interval (a slow Redis, a big backlog)
// overlapped the next one on another reflector replica: the same goals judged twice, counted
// twice (the second run saw the first one's removals as orphans).
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { runScript } from './scripts.ts';

/** How long a lease lasts if its run dies without releasing it. */
export const LEASE_MS = 10 * 60_000;

/** Runs `fn` holding the lease at `key`; while another run holds it, `skipped` instead. */
export async function withLease<T>(redis: Redis, key: string, fn: () => Promise<T>): Promise<T | { skipped: string }> {
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', LEASE_MS, 'NX')) !== 'OK') {
    return { skipped: 'an earlier run of this schedule is still under way' };
  }
  try {
    return await fn();
  } finally {
    await runScript(redis, 'leaseRelease', [key], [token]).catch(() => {});
  }
}
