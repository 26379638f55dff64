// Every atomic multi-key change is one named Lua script beside the concept it changes
// (shared/goal/lua/, shared/vfs/lua/, shared/agent/lua/, shared/runtime/lua/), loaded here. Each
// file's header names its KEYS and ARGV.
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

const GOAL_LUA = new URL('../goal/lua/', import.meta.url);
const VFS_LUA = new URL('../vfs/lua/', import.meta.url);
const AGENT_LUA = new URL('../agent/lua/', import.meta.url);
const RUNTIME_LUA = new URL('./lua/', import.meta.url);
const SCRIPTS = {
  goalCreate: { keys: 4, dir: GOAL_LUA },
  goalTransition: { keys: 10, dir: GOAL_LUA },
  approvalRequest: { keys: 9, dir: GOAL_LUA },
  approvalDecide: { keys: 4, dir: GOAL_LUA },
  budgetReserve: { keys: 2, dir: GOAL_LUA },
  usageAdd: { keys: 2, dir: GOAL_LUA },
  toolCalled: { keys: 5, dir: GOAL_LUA },
  toolStart: { keys: 3, dir: GOAL_LUA },
  subtaskStart: { keys: 2, dir: GOAL_LUA },
  subtaskFailed: { keys: 2, dir: GOAL_LUA },
  checkpointSave: { keys: 1, dir: GOAL_LUA },
  checkpointRead: { keys: 1, dir: GOAL_LUA },
  checkpointClear: { keys: 1, dir: GOAL_LUA },
  parkedRelease: { keys: 1, dir: GOAL_LUA },
  vfsWrite: { keys: 10, dir: VFS_LUA },
  vfsEvict: { keys: 4, dir: VFS_LUA },
  transcriptSave: { keys: 4, dir: AGENT_LUA },
  leaseUpdate: { keys: 1, dir: RUNTIME_LUA },
} as const;
export type ScriptName = keyof typeof SCRIPTS;

const loaded = new WeakSet<Redis>();
const sources = new Map<ScriptName, string>();

/**
 * A `--- @include "<path>"` line (relative to the file it is in) stands for that file's text, as
 * in BullMQ; a file included twice into one script is inserted once.
 */
const INCLUDE = /^--- @include "([^"]+)"$/gm;

function source(name: ScriptName): string {
  let s = sources.get(name);
  if (!s) {
    s = withIncludes(new URL(`${name}.lua`, SCRIPTS[name].dir), new Set());
    sources.set(name, s);
  }
  return s;
}

function withIncludes(file: URL, seen: Set<string>): string {
  return readFileSync(file, 'utf8').replace(INCLUDE, (_line, rel: string) => {
    const inc = new URL(rel, file);
    if (seen.has(inc.href)) return '';
    seen.add(inc.href);
    return withIncludes(inc, seen);
  });
}

/**
 * Defines deepq's scripts as commands on a client. Must happen before the client's first
 * command when auto-pipelining is on: ioredis copies the defined commands into each
 * pipeline when it is created, so a script defined later is missing from a pipeline
 * already open ("pipeline[functionName] is not a function", and the batch never settles).
 */
export function defineScripts(redis: Redis): void {
  if (loaded.has(redis)) return;
  for (const [n, spec] of Object.entries(SCRIPTS)) {
    redis.defineCommand(`deepq_${n}`, { numberOfKeys: spec.keys, lua: source(n as ScriptName) });
  }
  loaded.add(redis);
}

/** Runs a named script (EVALSHA with EVAL fallback, via ioredis defineCommand). */
export async function runScript(
  redis: Redis,
  name: ScriptName,
  keys: string[],
  args: (string | number)[],
): Promise<unknown> {
  defineScripts(redis);
  if (keys.length !== SCRIPTS[name].keys)
    throw new Error(`script ${name} takes ${SCRIPTS[name].keys} keys, got ${keys.length}`);
  const fn = (redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[`deepq_${name}`]!;
  return fn.call(redis, ...keys, ...args.map(String));
}
