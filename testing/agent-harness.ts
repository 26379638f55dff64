// In-process pieces for agent-level tests: a Runtime whose provider is the real
// AnthropicProvider pointed at a local Messages-API server, on a private Redis, and a
// logger whose lines the test can read. Tests of the agent alone (no VFS, no stores) use
// the server without any Redis: `useMessagesApi(null, ...)`, `testConfig(UNUSED_REDIS_URL, ...)`.

import { Writable } from 'node:stream';
import { after, before } from 'node:test';
import { type Logger, pino } from 'pino';
import { AnthropicProvider } from '../shared/agent/providers/anthropic.ts';
import type { CallContext } from '../shared/agent/providers/types.ts';
import { type Config, loadConfig } from '../shared/runtime/config.ts';
import { createRuntime, type Runtime } from '../shared/runtime/runtime.ts';
import { testEnv } from './fleet.ts';
import { FAKE_API_KEY, type MessagesApiServer, startMessagesApiServer } from './messages-api-server.ts';
import type { TestRedis } from './redis.ts';

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** A pino logger (same library as the services) whose parsed lines land in `lines`. */
export function captureLogger(level = 'debug'): { logger: Logger; lines: LogLine[]; raw: () => string } {
  const lines: LogLine[] = [];
  let raw = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      const s = String(chunk);
      raw += s;
      for (const l of s.split('\n').filter(Boolean)) lines.push(JSON.parse(l) as LogLine);
      cb();
    },
  });
  return { logger: pino({ level }, stream), lines, raw: () => raw };
}

/** Env for services (child processes or in-process) that must talk to the test server. */
export function anthropicEnv(server: MessagesApiServer, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return server.env({ DEEPQ_MODEL_HIGH: TEST_MODELS.HIGH, DEEPQ_MODEL_LOW: TEST_MODELS.LOW, ...extra });
}

export function anthropicAt(
  server: MessagesApiServer,
  timeoutMs = 10_000,
  opts: { stream?: boolean; maxCallMs?: number } = {},
): AnthropicProvider {
  return new AnthropicProvider({ apiKey: FAKE_API_KEY, baseURL: server.url, timeoutMs, ...opts });
}

/** Model ids the tests configure for the tiers (DEEPQ_MODEL_HIGH / DEEPQ_MODEL_LOW). */
export const TEST_MODELS = { HIGH: 'test-model-high', LOW: 'test-model-low' } as const;

/** For tests that load a config but never connect: no client is ever made for this URL. */
export const UNUSED_REDIS_URL = 'redis://unused.invalid:6379';

/** Config as a service would load it from the environment, pointed at the test server. */
export function testConfig(
  redisUrl: string,
  server: MessagesApiServer,
  extraEnv: NodeJS.ProcessEnv = {},
): { cfg: Config; env: NodeJS.ProcessEnv } {
  const env = testEnv(redisUrl, { ...anthropicEnv(server), LOG_LEVEL: 'silent', ...extraEnv });
  return { cfg: loadConfig(env), env };
}

/** A Runtime built exactly as the services build theirs (real provider, VFS, stores). */
export function testRuntime(
  redisUrl: string,
  server: MessagesApiServer,
  extraEnv: NodeJS.ProcessEnv = {},
): Runtime & { env: NodeJS.ProcessEnv } {
  const { cfg, env } = testConfig(redisUrl, server, extraEnv);
  const rt = createRuntime(cfg, 'test');
  return Object.assign(rt, { env });
}

export function ctxFor(role: string, extra: Partial<CallContext> = {}): Omit<CallContext, 'tier' | 'contract'> {
  return {
    role,
    kind: 'subagent',
    goalId: 'goaltest01',
    step: 1,
    threadId: `goal-goaltest01--${role}-0000abcd`,
    ...extra,
  };
}

/**
 * The file's Messages-API server (and, with `runtime`, an in-process Runtime on it), started
 * once the file's private Redis is up and closed after its tests; `assign` hands them over.
 * `redis` null: the server alone, for tests that need no Redis (no runtime then).
 */
export function useMessagesApi(
  redis: TestRedis | null,
  assign: (server: MessagesApiServer, rt: Runtime) => void,
  opts: { runtime?: boolean } = {},
): void {
  if (opts.runtime && !redis) throw new Error("useMessagesApi: a runtime needs the file's Redis");
  let server: MessagesApiServer | undefined;
  let rt: Runtime | undefined;
  before(async () => {
    if (redis) await redis.ready;
    server = await startMessagesApiServer();
    if (opts.runtime && redis) rt = testRuntime(redis.url, server);
    assign(server, rt as Runtime);
  });
  after(async () => {
    await rt?.close();
    await server?.close();
  });
}
