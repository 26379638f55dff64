// The reflector's maintenance queue: the TTL sweep and the reconciler (job schedulers, one
// run at a time fleet-wide per schedule: each run holds a lease) and the per-goal deadline
// jobs, routed by job name.
import { DelayedError, type Job } from 'bullmq';
import { withLease } from '../../shared/runtime/lease.ts';
import { MAINTENANCE_JOBS, MAINTENANCE_QUEUE, RECONCILE_SCHEDULER_ID } from '../../shared/runtime/queues.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { DeadlineEarly, enforceDeadline } from './deadline.ts';
import { reconcile } from './reconcile.ts';
import { scheduleSweep, sweep } from './sweep.ts';

export function maintenanceHandler(rt: Runtime) {
  return async (job: Job, _signal?: AbortSignal, token?: string): Promise<unknown> => {
    switch (job.name) {
      case MAINTENANCE_JOBS.reconcile:
        return withLease(rt.redis, rt.goals.keys.maintenanceLease('reconcile'), () => reconcile(rt));
      case MAINTENANCE_JOBS.deadline:
        return deadline(rt, job, token);
      default:
        return withLease(rt.redis, rt.goals.keys.maintenanceLease('sweep'), () => sweep(rt));
    }
  };
}

/** A deadline job that came early waits again, as the same job (an add of its id would be ignored). */
async function deadline(rt: Runtime, job: Job, token?: string): Promise<string> {
  try {
    return await enforceDeadline(rt, String(job.data?.goalId ?? ''));
  } catch (err) {
    if (!(err instanceof DeadlineEarly)) throw err;
    await job.moveToDelayed(Date.now() + err.waitMs, token);
    throw new DelayedError();
  }
}

/** Upserts are idempotent across reflector replicas. */
export async function scheduleMaintenance(rt: Runtime): Promise<void> {
  await scheduleSweep(rt);
  await rt.queues.get(MAINTENANCE_QUEUE).upsertJobScheduler(
    RECONCILE_SCHEDULER_ID,
    { every: rt.cfg.reconcileIntervalSeconds * 1000 },
    {
      name: MAINTENANCE_JOBS.reconcile,
      data: {},
      opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } },
    },
  );
}

/**
 * The schedules at start, and again each time Redis comes back: one that lost its data (no
 * persistence, a crash before a snapshot) came back without them, and the fleet carried on
 * with no sweep, reconciler or rate-limit release until the reflector was restarted.
 */
export async function keepMaintenanceScheduled(rt: Runtime): Promise<void> {
  // Listening first: a Redis that restarts while the first scheduling is under way (its
  // commands wait out the reconnect) must not leave the schedules it wrote before lost.
  rt.redis.on('ready', () => {
    scheduleMaintenance(rt).catch((err: Error) =>
      rt.logger.warn({ err: { message: err.message } }, 'could not schedule maintenance; trying at the next reconnect'),
    );
  });
  await scheduleMaintenance(rt);
}
