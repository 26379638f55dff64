// MCP metrics, registered on the process's registry (shared/runtime/metrics.ts's), beside the
// per-tool deepq_tool_calls_total / deepq_tool_latency_seconds every tool call gets (MCP tools
// under their configured name, `mcp:<server>/<tool>`). Labels are the configured server names
// and fixed statuses: never a goal id, never a tool argument.
import { Counter, Gauge, type Registry } from 'prom-client';

export interface McpMetrics {
  up: Gauge<'server'>;
  connects: Counter<'server' | 'outcome'>;
  calls: Counter<'server' | 'status'>;
}

function once<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export function mcpMetrics(registry: Registry): McpMetrics {
  const registers = [registry];
  return {
    up: once(
      registry,
      'deepq_mcp_server_up',
      () =>
        new Gauge({
          name: 'deepq_mcp_server_up',
          help: 'MCP server connected and its tools listed (1) or not (0)',
          labelNames: ['server'],
          registers,
        }),
    ),
    connects: once(
      registry,
      'deepq_mcp_connects_total',
      () =>
        new Counter({
          name: 'deepq_mcp_connects_total',
          help: 'MCP connection attempts, by outcome (ok, failed) and lost connections (lost)',
          labelNames: ['server', 'outcome'],
          registers,
        }),
    ),
    calls: once(
      registry,
      'deepq_mcp_tool_calls_total',
      () =>
        new Counter({
          name: 'deepq_mcp_tool_calls_total',
          help: 'MCP tool calls by outcome (ok, tool_error, timeout, cancelled, unavailable, connection, error)',
          labelNames: ['server', 'status'],
          registers,
        }),
    ),
  };
}
