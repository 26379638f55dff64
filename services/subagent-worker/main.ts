// A subagent worker for one role: consumes `subagent-<role>`. Run as many replicas as load
// needs; a fleet-wide cap per role comes from config (BullMQ global concurrency). Wiring only.

import { ConfigError } from '../../shared/errors.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRuntime } from '../../shared/runtime/runtime.ts';
import { startService, stopOnSignals } from '../../shared/runtime/service.ts';
import { recordSubtaskFailure } from './final-failure.ts';
import { processSubagentJob } from './subagent-job.ts';

export async function main(cfg: Config, opts: { role: string; concurrency: number }) {
  const role = cfg.roles.find((r) => r.name === opts.role);
  if (!role)
    throw new ConfigError(
      `unknown role ${JSON.stringify(opts.role)} (configured roles: ${cfg.roles.map((r) => r.name).join(', ')})`,
    );
  const rt = createRuntime(cfg, `worker-${role.name}`);
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  const queueName = subagentQueueName(role.name);
  const queue = rt.queues.get(queueName);
  if (role.fleetConcurrency) await queue.setGlobalConcurrency(role.fleetConcurrency);
  const svc = await startService({
    rt,
    name: `worker-${role.name}`,
    queueName,
    role: role.name,
    concurrency: opts.concurrency,
    handler: (job, signal) => processSubagentJob({ rt, role, queue }, job, signal),
    onFinalFailure: recordSubtaskFailure(rt),
    manualRateLimit: true,
  });
  stopOnSignals(svc, rt.logger);
  return svc;
}
