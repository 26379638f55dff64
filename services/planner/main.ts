// The planner service: consumes `plan`, dispatches one flow per cycle. Wiring only.
import type { Config } from '../../shared/config.ts';
import { createRuntime } from '../../shared/runtime.ts';
import { startService, stopOnSignals } from '../../shared/service.ts';
import { processPlanJob } from '../../shared/planner.ts';
import { PLAN_QUEUE } from '../../shared/queues.ts';
import { failGoalOnFinalFailure } from '../../shared/final-failure.ts';

export async function main(cfg: Config, opts: { concurrency: number }) {
  const rt = createRuntime(cfg, 'planner');
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  const svc = await startService({
    rt, name: 'planner', queueName: PLAN_QUEUE, role: 'planner', concurrency: opts.concurrency,
    handler: (job, signal) => processPlanJob(rt, job, signal),
    onFinalFailure: failGoalOnFinalFailure(rt, 'planning'),
  });
  stopOnSignals(svc, rt.logger);
  return svc;
}
