// The MCP client manager of one worker process: a connection to each MCP server its role
// uses, the role's selection of their tools as deepq Tools (`mcp__<server>__<tool>`), the
// readiness checks (`mcp:<server>`) and the shutdown. See README "Tools and MCP".

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { McpServerConfig } from '../../runtime/config.ts';
import { scrubSecrets } from '../../runtime/logger.ts';
import { cutChars } from '../tools/paging.ts';
import type { Tool, ToolScope } from '../tools.ts';
import { type ConnectionOptions, McpCallError, McpConnection, type McpToolInfo } from './connection.ts';
import { toolResultOrThrow } from './content.ts';
import { type McpMetrics, mcpMetrics } from './metrics.ts';
import { assignToolNames, WildcardToolLabels } from './names.ts';
import { mcpSelection, type ResolvedServer, resolveServer, type ToolSelection } from './resolve.ts';

/** The servers a role uses, resolved, with the secrets their values hold. */
export interface RoleMcpServers {
  servers: { server: ResolvedServer; selection: ToolSelection }[];
  secrets: string[];
}

/**
 * The MCP servers a role's tools name, resolved from config and the environment. Throws a
 * ConfigError naming the field and variable when an env value is missing. Servers the role
 * does not use are not resolved (another role's missing variable is not this worker's problem).
 */
export function resolveRoleServers(
  role: { tools: readonly string[] },
  mcpServers: Record<string, McpServerConfig>,
  env: NodeJS.ProcessEnv = process.env,
): RoleMcpServers {
  const out: RoleMcpServers = { servers: [], secrets: [] };
  for (const [name, selection] of mcpSelection(role.tools)) {
    const cfg = mcpServers[name];
    if (!cfg) throw new Error(`MCP server "${name}" is not configured (config validation should have said so)`);
    const { server, secrets } = resolveServer(name, cfg, env);
    out.servers.push({ server, selection });
    out.secrets.push(...secrets);
  }
  return out;
}

export interface McpManagerOptions {
  log: Logger;
  /** Secrets scrubbed from results, errors and logs: the runtime's list (the resolved values are in it). */
  secrets: string[];
  registry?: Registry;
  backoff?: ConnectionOptions['backoff'];
  pingIntervalMs?: number;
}

/** One exposed tool: its API name and where it goes. */
interface Exposed {
  name: string;
  conn: McpConnection;
  tool: McpToolInfo;
  /** For the tool metrics and the timeline: bounded (WildcardToolLabels). */
  label: string;
}

/**
 * What `mcp:<server>/*` offers of one server at most: every tool's definition rides in every
 * request of the role (a server listing thousands filled each one), and OpenAI's API takes 128.
 */
export const MAX_TOOLS_PER_SERVER = 128;

/** May a call of the tool run again after a crash: the server says so, or the config does. */
function repeatable(e: Exposed): boolean {
  const listed = e.conn.server.idempotentTools ?? [];
  return e.tool.repeatable || listed === '*' || listed.includes(e.tool.name);
}

/**
 * A call that timed out or lost its connection may have reached the server and acted: for a tool
 * that must not run twice, the model is told to check before calling again (it is never retried).
 */
function effectUnknown(e: Exposed, err: unknown): unknown {
  if (repeatable(e) || !(err instanceof McpCallError) || (err.kind !== 'timeout' && err.kind !== 'connection')) {
    return err;
  }
  const hint =
    'it may have taken effect (the tool is not marked read-only or idempotent): check before calling it again';
  return new McpCallError(err.kind, `${err.message}; ${hint}`);
}

export class McpManager {
  private readonly conns: { conn: McpConnection; selection: ToolSelection }[];
  private exposed: Exposed[] = [];
  private stale = true;
  private readonly wildcardLabels = new WildcardToolLabels(MAX_TOOLS_PER_SERVER);
  /** Each connection's listing when the exposed tools were last marked stale. */
  private readonly listedBefore = new Map<McpConnection, McpToolInfo[] | null>();
  private readonly metrics?: McpMetrics;
  private closing?: Promise<void>;

  constructor(
    resolved: RoleMcpServers,
    private readonly opts: McpManagerOptions,
  ) {
    this.metrics = opts.registry ? mcpMetrics(opts.registry) : undefined;
    const scrub = (s: string) => scrubSecrets(s, opts.secrets);
    this.conns = resolved.servers.map(({ server, selection }) => {
      const conn = new McpConnection(server, {
        log: opts.log,
        scrub,
        metrics: this.metrics,
        backoff: opts.backoff,
        pingIntervalMs: opts.pingIntervalMs,
        onChange: () => this.onChange(conn),
      });
      this.metrics?.up.set({ server: server.name }, 0);
      return { conn, selection };
    });
  }

  /** Server names, in the role's order. */
  get servers(): string[] {
    return this.conns.map((c) => c.conn.name);
  }

  connection(name: string): McpConnection | undefined {
    return this.conns.find((c) => c.conn.name === name)?.conn;
  }

  /** Connects to every server in the background; failures are logged and retried with backoff. */
  start(): void {
    for (const { conn } of this.conns) conn.start();
  }

  /** `/readyz` checks: `mcp:<server>` is true while the server is connected. */
  checks(): Record<string, boolean> {
    return Object.fromEntries(this.conns.map(({ conn }) => [`mcp:${conn.name}`, conn.state === 'up']));
  }

  private onChange(conn: McpConnection): void {
    if (this.listedBefore.get(conn) === conn.tools) return;
    this.listedBefore.set(conn, conn.tools);
    this.stale = true;
    const sel = this.conns.find((c) => c.conn === conn)?.selection;
    if (!conn.tools) return;
    const offered = new Set(conn.tools.map((t) => t.name));
    const warnMissing = (names: string[], what: string) => {
      const missing = names.filter((t) => !offered.has(t));
      if (!missing.length) return;
      const cut = (names: string[]) => names.slice(0, 50).map((n) => cutChars(n, 100));
      const fields = { mcpServer: conn.name, missing: cut(missing), offered: cut([...offered]) };
      this.opts.log.warn(fields, `MCP server "${conn.name}" does not offer ${what}: ${missing.join(', ')}`);
    };
    if (sel) warnMissing(sel.named, "the role's tool(s)");
    const idempotent = conn.server.idempotentTools;
    if (Array.isArray(idempotent)) warnMissing(idempotent, `the tool(s) of mcpServers.${conn.name}.idempotentTools`);
  }

  /**
   * Waits until every server has listed its tools once (each within its timeoutMs); throws,
   * naming the server and why, when one has not: the job's attempt fails with that reason.
   */
  async awaitTools(signal?: AbortSignal): Promise<void> {
    await Promise.all(
      this.conns.map(async ({ conn }) => {
        try {
          await conn.waitFor(() => conn.tools !== null, Date.now() + conn.server.timeoutMs, signal);
        } catch (err) {
          if (err instanceof McpCallError && err.kind === 'cancelled') throw err;
          const why = conn.lastError ?? 'it did not answer in time';
          throw new Error(`MCP server "${conn.name}" is unavailable: ${why}`);
        }
      }),
    );
  }

  private refresh(): Exposed[] {
    if (!this.stale) return this.exposed;
    this.stale = false;
    const picked: Omit<Exposed, 'name'>[] = [];
    for (const { conn, selection } of this.conns) {
      const tools = conn.tools ?? [];
      const named = new Set(selection.named);
      const byName = new Map(tools.map((t) => [t.name, t]));
      const namedTools = selection.named.flatMap((n) => byName.get(n) ?? []);
      const chosen = [...(selection.all ? this.firstOf(conn, tools) : []), ...namedTools];
      const seen = new Set<string>();
      for (const tool of chosen) {
        if (seen.has(tool.name)) continue;
        seen.add(tool.name);
        // A named tool's label is the config's name; one only '*' picked, the server's, bounded.
        const own = `mcp:${conn.name}/${tool.name}`;
        picked.push({ conn, tool, label: named.has(tool.name) ? own : this.wildcardLabels.of(conn.name, tool.name) });
      }
    }
    const names = assignToolNames(picked.map((p) => ({ server: p.conn.name, tool: p.tool.name })));
    this.exposed = picked.map((p, i) => ({ ...p, name: names[i]! }));
    return this.exposed;
  }

  /** `mcp:<server>/*` takes a server's first MAX_TOOLS_PER_SERVER tools; named ones are taken whatever their place. */
  private firstOf(conn: McpConnection, tools: McpToolInfo[]): McpToolInfo[] {
    if (tools.length <= MAX_TOOLS_PER_SERVER) return tools;
    this.opts.log.warn(
      { mcpServer: conn.name, tools: tools.length, offered: MAX_TOOLS_PER_SERVER },
      `MCP server "${conn.name}" lists ${tools.length} tools: its first ${MAX_TOOLS_PER_SERVER} are offered ` +
        `(mcp:${conn.name}/*); name the ones the role needs (mcp:${conn.name}/<tool>) to choose others`,
    );
    return tools.slice(0, MAX_TOOLS_PER_SERVER);
  }

  /**
   * The role's MCP tools as deepq Tools, from the servers' latest listings (a server that is
   * reconnecting keeps its last list; its calls wait for it). `signal` (the job's) aborts calls.
   */
  tools(scope?: ToolScope, signal?: AbortSignal): Tool[] {
    return this.refresh().map((e) => ({
      def: {
        name: e.name,
        description:
          e.tool.description || e.tool.title || `Tool "${cutChars(e.tool.name, 100)}" of MCP server "${e.conn.name}".`,
        input_schema: e.tool.inputSchema,
      },
      label: e.label,
      approvalName: `mcp:${e.conn.name}/${e.tool.name}`,
      atMostOnce: !repeatable(e),
      run: (input: unknown) => this.run(e, input, scope, signal),
    }));
  }

  private async run(e: Exposed, input: unknown, scope?: ToolScope, signal?: AbortSignal): Promise<string> {
    const args = input ?? {};
    if (typeof args !== 'object' || Array.isArray(args)) {
      throw new Error(`bad arguments for ${e.name}: expected a JSON object`);
    }
    const where = scope ? { goalId: scope.goalId, step: scope.step, role: scope.role, threadId: scope.threadId } : {};
    const what = { ...where, mcpServer: e.conn.name, tool: e.tool.name };
    this.opts.log.debug(what, 'MCP tool call started');
    const started = performance.now();
    let status = 'ok';
    try {
      const res = await e.conn.call(e.tool.name, args as Record<string, unknown>, signal);
      if (res.isError) status = 'tool_error';
      return toolResultOrThrow(res, (s) => scrubSecrets(s, this.opts.secrets));
    } catch (err) {
      if (status === 'ok') status = err instanceof McpCallError ? err.kind : 'error';
      throw effectUnknown(e, err);
    } finally {
      this.metrics?.calls.inc({ server: e.conn.name, status });
      this.opts.log.debug({ ...what, status, ms: Math.round(performance.now() - started) }, 'MCP tool call');
    }
  }

  /** Closes every client (stdio servers end, HTTP sessions are terminated). */
  close(): Promise<void> {
    this.closing ??= Promise.all(this.conns.map(({ conn }) => conn.close())).then(() => {});
    return this.closing;
  }
}
