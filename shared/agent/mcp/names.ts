// The names MCP tools go by in the Messages API: `mcp__<server>__<tool>`, which must match
// ^[a-zA-Z0-9_-]{1,64}$ and be unique within one agent's tool list. A tool name that does not
// fit (other characters, too long) or that two servers would share after cleaning is made to
// fit and suffixed with a short hash of its server and original name, so the same tool gets
// the same name in every worker replica.
import { createHash } from 'node:crypto';

/** What the Messages API accepts as a tool name. */
export const API_TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;
export const API_TOOL_NAME_MAX = 64;
const HASH_CHARS = 8;

function hashOf(server: string, tool: string): string {
  return createHash('sha256').update(`${server}\0${tool}`).digest('hex').slice(0, HASH_CHARS);
}

/** `mcp__<server>__<tool>` when that is a valid API name, else a cleaned, hashed form. */
export function namespacedToolName(server: string, tool: string): string {
  const plain = `mcp__${server}__${tool}`;
  if (API_TOOL_NAME_RE.test(plain)) return plain;
  return hashedToolName(server, tool);
}

/** `mcp__<server>__<cleaned tool, cut to fit>_<hash>`: always valid, unique per (server, tool). */
export function hashedToolName(server: string, tool: string): string {
  const prefix = `mcp__${server.replace(/[^a-zA-Z0-9_-]/g, '_')}__`;
  const suffix = `_${hashOf(server, tool)}`;
  const room = Math.max(0, API_TOOL_NAME_MAX - prefix.length - suffix.length);
  const cleaned = tool.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, room);
  return `${prefix}${cleaned}${suffix}`.slice(-API_TOOL_NAME_MAX);
}

/**
 * API names for a list of (server, tool) pairs, in order: each takes its plain name unless an
 * earlier pair already took it (e.g. server `a__b` tool `c` against server `a` tool `b__c`),
 * then the hashed form. Duplicated pairs are the caller's to drop.
 */
export function assignToolNames(pairs: readonly { server: string; tool: string }[]): string[] {
  const taken = new Set<string>();
  return pairs.map(({ server, tool }) => {
    let name = namespacedToolName(server, tool);
    if (taken.has(name)) name = hashedToolName(server, tool);
    // Two distinct pairs with the same hash prefix are astronomically unlikely; still unique.
    for (let i = 2; taken.has(name); i++) name = `${hashedToolName(server, tool).slice(0, API_TOOL_NAME_MAX - 3)}_${i}`;
    taken.add(name);
    return name;
  });
}

/** A tool name plain enough to be a metric label (the MCP spec's recommended characters, short). */
const PLAIN_TOOL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The `tool` label (metrics, timeline) of the tools `mcp:<server>/*` picks. The names are the
 * server's: one could list names of any length, or rename its tools on every list_changed, and
 * each name would be a series kept for the process's life. A plain name gets its own label, up
 * to `max` names per server; any other name, and every name past those, goes as `mcp:<server>/*`.
 */
export class WildcardToolLabels {
  private readonly seen = new Map<string, Set<string>>();

  constructor(private readonly max: number) {}

  of(server: string, tool: string): string {
    const own = `mcp:${server}/${tool}`;
    const labels = this.seen.get(server) ?? new Set<string>();
    this.seen.set(server, labels);
    if (labels.has(own)) return own;
    if (!PLAIN_TOOL_NAME.test(tool) || labels.size >= this.max) return `mcp:${server}/*`;
    labels.add(own);
    return own;
  }
}
