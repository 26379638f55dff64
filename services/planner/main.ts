// The planner service: consumes `plan`, dispatches one flow per cycle. Wiring only.

import { failGoalOnFinalFailure } from '../../shared/goal/final-failure.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { PLAN_QUEUE } from '../../shared/runtime/queues.ts';
import { createRuntime } from '../../shared/runtime/runtime.ts';
import { startService, stopOnSignals } from '../../shared/runtime/service.ts';
import { startTracing } from '../../shared/runtime/tracing.ts';
import { processPlanJob } from './plan-job.ts';

export async function main(cfg: Config, opts: { concurrency: number }) {
  const rt = createRuntime(cfg, 'planner');
  // Before any queue or worker is made: BullMQ takes its telemetry when they are built.
  await startTracing('planner', rt.logger, process.env, rt.secrets);
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  const svc = await startService({
    rt,
    name: 'planner',
    queueName: PLAN_QUEUE,
    role: 'planner',
    concurrency: opts.concurrency,
    // The token lets a plan job park itself while its goal waits for a bigger budget.
    handler: (job, signal, token) => processPlanJob(rt, job, signal, token),
    onFinalFailure: failGoalOnFinalFailure(rt, 'planning'),
  });
  stopOnSignals(svc, rt.logger);
  return svc;
}
