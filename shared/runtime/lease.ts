// A lease on one run of a fleet-wide chore. BullMQ's job schedulers queue a schedule's next run
// when the current one starts, so a run longer than its interval (a slow Redis, a big backlog)
// overlapped the next one on another reflector replica: the same goals judged twice, counted
// twice (the second run saw the first one's removals as orphans).
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { runScript } from './scripts.ts';

/**
 * How long a lease lasts without renewal: its run renews it every third of that, so a run that
 * died (SIGKILL, a lost node) holds the schedule back for this long at most.
 */
export const LEASE_MS = 30_000;

/** Runs `fn` holding the lease at `key`; while another run holds it, `skipped` instead. */
export async function withLease<T>(
  redis: Redis,
  key: string,
  fn: () => Promise<T>,
  leaseMs = LEASE_MS,
): Promise<T | { skipped: string }> {
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', leaseMs, 'NX')) !== 'OK') {
    return { skipped: 'an earlier run of this schedule is still under way' };
  }
  const renew = setInterval(() => {
    runScript(redis, 'leaseUpdate', [key], [token, leaseMs]).catch(() => {});
  }, leaseMs / 3);
  renew.unref();
  try {
    return await fn();
  } finally {
    clearInterval(renew);
    await runScript(redis, 'leaseUpdate', [key], [token, 0]).catch(() => {});
  }
}
