// Every atomic multi-key change is one named Lua script in shared/lua/, loaded here.
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

const LUA_DIR = new URL('./lua/', import.meta.url);
const SCRIPTS = {
  goalTransition: 2,
  vfsWrite: 3,
  vfsEvict: 3,
} as const;
export type ScriptName = keyof typeof SCRIPTS;

const loaded = new WeakSet<Redis>();
const sources = new Map<ScriptName, string>();

function source(name: ScriptName): string {
  let s = sources.get(name);
  if (!s) {
    s = readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8');
    sources.set(name, s);
  }
  return s;
}

/**
 * Defines deepq's scripts as commands on a client. Must happen before the client's first
 * command when auto-pipelining is on: ioredis copies the defined commands into each
 * pipeline when it is created, so a script defined later is missing from a pipeline
 * already open ("pipeline[functionName] is not a function", and the batch never settles).
 */
export function defineScripts(redis: Redis): void {
  if (loaded.has(redis)) return;
  for (const [n, numberOfKeys] of Object.entries(SCRIPTS)) {
    redis.defineCommand(`deepq_${n}`, { numberOfKeys, lua: source(n as ScriptName) });
  }
  loaded.add(redis);
}

/** Runs a named script (EVALSHA with EVAL fallback, via ioredis defineCommand). */
export async function runScript(redis: Redis, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  defineScripts(redis);
  if (keys.length !== SCRIPTS[name]) throw new Error(`script ${name} takes ${SCRIPTS[name]} keys, got ${keys.length}`);
  const fn = (redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[`deepq_${name}`]!;
  return fn.call(redis, ...keys, ...args.map(String));
}
