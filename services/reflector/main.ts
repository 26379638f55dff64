// The reflector service: consumes `reflect` (one job per finished cycle) and hosts the TTL
// sweep's job scheduler. Wiring only.

import { failGoalOnFinalFailure } from '../../shared/goal/final-failure.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { MAINTENANCE_QUEUE, REFLECT_QUEUE } from '../../shared/runtime/queues.ts';
import { createRuntime } from '../../shared/runtime/runtime.ts';
import { startService, stopOnSignals } from '../../shared/runtime/service.ts';
import { processReflectJob } from './reflect-job.ts';
import { scheduleSweep, sweep } from './sweep.ts';

export async function main(cfg: Config, opts: { concurrency: number }) {
  const rt = createRuntime(cfg, 'reflector');
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  const svc = await startService({
    rt,
    name: 'reflector',
    queueName: REFLECT_QUEUE,
    role: 'reflector',
    concurrency: opts.concurrency,
    handler: (job, signal) => processReflectJob(rt, job, signal),
    onFinalFailure: failGoalOnFinalFailure(rt, 'reflection'),
    sideQueues: [{ queueName: MAINTENANCE_QUEUE, role: 'sweeper', concurrency: 1, handler: () => sweep(rt) }],
    reportQueues: rt.queues.allNames(),
    onStart: () => scheduleSweep(rt),
  });
  stopOnSignals(svc, rt.logger);
  return svc;
}
