// A subagent worker for one role: consumes `subagent-<role>`. Run as many replicas as load
// needs; a fleet-wide cap per role comes from config (BullMQ global concurrency). Wiring only.
// A role whose tools name MCP servers gets a connection to each (shared/agent/mcp/): their
// values from the environment are resolved (and scrubbed) before anything starts, /readyz
// names each server, a job waits for its servers' tools, and stop closes the clients.
// A role that lists run_code / run_tests probes its sandbox first (shared/agent/sandbox/probe.ts).

import { McpManager, resolveRoleServers } from '../../shared/agent/mcp/index.ts';
import { probeSandbox, usesSandbox } from '../../shared/agent/sandbox/probe.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { createRuntime } from '../../shared/runtime/runtime.ts';
import { type RunningService, startService, stopOnSignals } from '../../shared/runtime/service.ts';
import { startTracing } from '../../shared/runtime/tracing.ts';
import { DirBlobStore } from '../../shared/vfs/blob-store.ts';
import { recordSubtaskFailure } from './final-failure.ts';
import { processSubagentJob } from './subagent-job.ts';

export async function main(cfg: Config, opts: { role: string; concurrency: number }): Promise<RunningService> {
  const role = cfg.roles.find((r) => r.name === opts.role);
  if (!role)
    throw new ConfigError(
      `unknown role ${JSON.stringify(opts.role)} (configured roles: ${cfg.roles.map((r) => r.name).join(', ')})`,
    );
  // A missing env var of an MCP server stops the process here, before any connection.
  const mcpServers = resolveRoleServers(role, cfg.mcpServers);
  // Fail closed: a role that runs code starts only where its sandbox works (or says it has none).
  const sandbox = usesSandbox(role) ? await probeSandbox(role.name, role.sandbox) : {};
  // Its artifacts over the spill threshold go there: a folder it cannot make stops it now (exit 78),
  // not at its first large artifact.
  await new DirBlobStore(cfg.vfs.blobDir, cfg.prefix).ready();
  const rt = createRuntime(cfg, `worker-${role.name}`);
  // Before any queue or worker is made: BullMQ takes its telemetry when they are built.
  await startTracing(`worker-${role.name}`, rt.logger, process.env, rt.secrets);
  if (sandbox.warning) rt.logger.warn(sandbox.warning);
  // The runtime's logger and error scrubbing read this list: resolved secrets join it.
  rt.secrets.push(...mcpServers.secrets);
  if (cfg.providerNotice) rt.logger.warn(cfg.providerNotice);
  const mcp = mcpServers.servers.length
    ? new McpManager(mcpServers, { log: rt.logger, secrets: rt.secrets, registry: rt.metrics.registry })
    : undefined;
  mcp?.start();
  const queueName = subagentQueueName(role.name);
  const queue = rt.queues.get(queueName);
  const extraTools = mcp ? mcp.tools.bind(mcp) : undefined;
  const svc = await startService({
    rt,
    name: `worker-${role.name}`,
    queueName,
    role: role.name,
    concurrency: opts.concurrency,
    handler: async (job, signal, token) => {
      // Every server has listed its tools once (or the attempt fails naming the one that has not);
      // a cancelled goal goes on to the job, which returns it as skipped.
      await mcp?.awaitTools(signal).catch((err) => {
        if (!signal.aborted) throw err;
      });
      // The token lets a job waiting for a human's approval move itself to delayed.
      return processSubagentJob({ rt, role, queue, extraTools }, job, signal, token);
    },
    // After the ops server is up (it waits on Redis), before the first job is taken.
    beforeRun: async () => {
      // The cap lives on the queue in Redis: a config that no longer sets one lifts it.
      if (role.fleetConcurrency) await queue.setGlobalConcurrency(role.fleetConcurrency);
      else await queue.removeGlobalConcurrency();
    },
    onFinalFailure: recordSubtaskFailure(rt),
    readyChecks: mcp ? () => mcp.checks() : undefined,
  }).catch(async (err) => {
    await mcp?.close();
    throw err;
  });
  // The clients close after the drain: running jobs keep their MCP tools until they finish.
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= svc.stop().finally(() => mcp?.close());
    return stopped;
  };
  const running = { ...svc, stop };
  stopOnSignals(running, rt.logger);
  return running;
}
