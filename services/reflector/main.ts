// The reflector service: consumes `reflect` (one job per finished cycle) and hosts the
// maintenance queue (TTL sweep, reconciler, time-budget deadlines). Wiring only.

import { failGoalOnFinalFailure } from '../../shared/goal/final-failure.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { MAINTENANCE_QUEUE, REFLECT_QUEUE } from '../../shared/runtime/queues.ts';
import { createRuntime, type Runtime } from '../../shared/runtime/runtime.ts';
import { startService, stopOnSignals } from '../../shared/runtime/service.ts';
import { startTracing } from '../../shared/runtime/tracing.ts';
import { countCancelLogged } from './cancel-counts.ts';
import { keepMaintenanceScheduled, maintenanceHandler } from './maintenance.ts';
import { processReflectJob } from './reflect-job.ts';

export async function main(cfg: Config, opts: { concurrency: number }) {
  const rt = createRuntime(cfg, 'reflector');
  // Before any queue or worker is made: BullMQ takes its telemetry when they are built.
  await startTracing('reflector', rt.logger, process.env, rt.secrets);
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  exportZeroSeries(rt);
  const svc = await startService({
    rt,
    name: 'reflector',
    queueName: REFLECT_QUEUE,
    role: 'reflector',
    concurrency: opts.concurrency,
    handler: (job, signal, token) => processReflectJob(rt, job, signal, token),
    onFinalFailure: failGoalOnFinalFailure(rt, 'reflection'),
    sideQueues: [
      { queueName: MAINTENANCE_QUEUE, role: 'maintenance', concurrency: 1, handler: maintenanceHandler(rt) },
    ],
    reportQueues: rt.queues.allNames(),
    onStart: () => keepMaintenanceScheduled(rt),
    onCancel: (goalId) => countCancelLogged(rt, goalId),
  });
  stopOnSignals(svc, rt.logger);
  return svc;
}

/**
 * The reflector's labelled counters exported at 0 from the start: a series that first appears
 * at 1 hides that step from increase(), so "3 stalls in an hour" took 4 (after every restart).
 */
function exportZeroSeries(rt: Runtime): void {
  for (const action of ['escalate', 'fail']) rt.metrics.stalls.inc({ action }, 0);
  for (const from_status of ['queued', 'planning', 'running', 'reflecting'])
    rt.metrics.reconciled.inc({ from_status }, 0);
}
