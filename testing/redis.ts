// Every test file gets its own redis-server on a free port; the shared 6379 is never used.
import { after } from 'node:test';
import { Redis } from 'ioredis';
import { type PrivateRedis, startPrivateRedis } from '../cli/private-redis.ts';
import { stopEverything } from './fleet.ts';

export interface TestRedis {
  server: PrivateRedis;
  url: string;
  client: Redis;
  /** Resolves once the server is up; await it in `before` before using url or client. */
  ready: Promise<void>;
}

/**
 * Starts a private redis-server right away (not in a hook: the order of root-level hooks
 * is not something to lean on) and stops it after the file's tests.
 */
export function useRedis(opts: { appendonly?: boolean; password?: string } = {}): TestRedis {
  const ctx = {} as TestRedis;
  ctx.ready = (async () => {
    ctx.server = await startPrivateRedis(opts);
    ctx.url = ctx.server.url;
    ctx.client = new Redis(ctx.url, { maxRetriesPerRequest: null });
    ctx.client.on('error', () => {});
  })();
  after(async () => {
    await ctx.ready.catch(() => {});
    // Root after() hooks run in registration order, and this one is registered first:
    // stop the file's service processes now, while Redis is still there for their drain.
    await stopEverything();
    ctx.client?.disconnect();
    await ctx.server?.stop();
  });
  return ctx;
}
