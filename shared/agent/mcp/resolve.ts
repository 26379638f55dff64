// From config to what a connection needs: the MCP servers a role uses (and which of their
// tools), and each server's env / header values resolved from the environment at start. Values
// taken from the environment are secrets: they are returned so the runtime scrubs them.
import { ConfigError } from '../../errors.ts';
import { HEADER_VALUE, type McpServerConfig } from '../../runtime/config.ts';
import { MCP_TOOL_RE } from '../roles.ts';

/**
 * Which of a server's tools a role takes: `all` (`mcp:<server>/*`, the server's first 128), and
 * the ones it names (`mcp:<server>/<tool>`, in its order), taken whatever their place.
 */
export interface ToolSelection {
  all: boolean;
  named: string[];
}

/** The role's MCP servers, in the order its tools first name them, with their selections. */
export function mcpSelection(roleTools: readonly string[]): Map<string, ToolSelection> {
  const out = new Map<string, ToolSelection>();
  for (const t of roleTools) {
    const m = MCP_TOOL_RE.exec(t);
    if (!m) continue;
    const [, server, tool] = m as unknown as [string, string, string];
    const sel = out.get(server) ?? { all: false, named: [] };
    out.set(server, sel);
    if (tool === '*') sel.all = true;
    else if (!sel.named.includes(tool)) sel.named.push(tool);
  }
  return out;
}

type ServerCommon = { name: string; timeoutMs: number; idempotentTools?: '*' | string[] };
export type ResolvedServer =
  | (ServerCommon & { type: 'stdio'; command: string; args: string[]; env: Record<string, string> })
  | (ServerCommon & { type: 'http'; url: URL; headers: Record<string, string> });

type ValueOrEnv = string | { env: string };

function resolveValues(
  server: string,
  field: 'env' | 'headers',
  values: Record<string, ValueOrEnv>,
  env: NodeJS.ProcessEnv,
  secrets: string[],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(values)) {
    if (typeof v === 'string') {
      out[key] = v;
      continue;
    }
    const value = env[v.env];
    if (value === undefined || value === '') {
      const state = value === undefined ? 'is not set' : 'is empty';
      const where = `mcpServers.${server}.${field}.${key}`;
      throw new ConfigError(`${where}: environment variable ${v.env} ${state} (MCP server "${server}" needs it)`);
    }
    // What a literal value is held to by the config's schema (a CR or LF would split a request).
    if (field === 'headers' ? !HEADER_VALUE.test(value) : value.includes('\0')) {
      const what = field === 'headers' ? 'a line break or NUL' : 'a NUL';
      throw new ConfigError(`mcpServers.${server}.${field}.${key}: environment variable ${v.env} holds ${what}`);
    }
    out[key] = value;
    secrets.push(...secretForms(value));
  }
  return out;
}

/** A secret value, and its token alone when it reads `<scheme> <token>` (`Bearer abc…`). */
export function secretForms(value: string): string[] {
  const forms = [value];
  const token = /^[A-Za-z][A-Za-z0-9_-]*\s+(\S+)$/.exec(value.trim())?.[1];
  if (token) forms.push(token);
  return forms;
}

/** Resolves one server's config; a missing env var is a ConfigError naming it and the field. */
export function resolveServer(
  name: string,
  cfg: McpServerConfig,
  env: NodeJS.ProcessEnv = process.env,
): { server: ResolvedServer; secrets: string[] } {
  const secrets: string[] = [];
  if (cfg.type === 'stdio') {
    const resolvedEnv = resolveValues(name, 'env', cfg.env, env, secrets);
    const server = { ...cfg, name, env: resolvedEnv };
    return { server, secrets };
  }
  const headers = resolveValues(name, 'headers', cfg.headers, env, secrets);
  const { timeoutMs, idempotentTools } = cfg;
  return { server: { type: 'http', name, url: new URL(cfg.url), headers, timeoutMs, idempotentTools }, secrets };
}
