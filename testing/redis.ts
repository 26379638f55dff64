// Every test file gets its own redis-server on a free port; the shared 6379 is never used.
import { once } from 'node:events';
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
    exitIfStillRunningAfter(AFTER_TESTS_EXIT_MS);
  });
  return ctx;
}

/** How long a test file's process may run on after its Redis stopped (its other after hooks included). */
const AFTER_TESTS_EXIT_MS = 60_000;

/**
 * Node 20's runner waits for each file's process to exit, and a test that timed out can leave a
 * client reconnecting or a service draining forever: the whole run then hangs. The file's
 * results are reported by then; its process exits, failed, naming why.
 */
function exitIfStillRunningAfter(ms: number): void {
  setTimeout(() => {
    process.stderr.write(`this test file's process was still running ${ms / 1000} s after its tests: ended\n`);
    process.exit(1);
  }, ms).unref();
}

/** Every value in a Redis, whatever its type, as one text: what a leak check searches. */
export async function everyValue(client: Redis): Promise<string> {
  const out: string[] = [];
  for (const k of await client.keys('*')) {
    const type = await client.type(k);
    if (type === 'string') out.push(String(await client.get(k)));
    else if (type === 'hash') out.push(JSON.stringify(await client.hgetall(k)));
    else if (type === 'stream') out.push(JSON.stringify(await client.xrange(k, '-', '+')));
    else if (type === 'list') out.push(JSON.stringify(await client.lrange(k, 0, -1)));
    else if (type === 'zset') out.push(JSON.stringify(await client.zrange(k, '0', '-1')));
  }
  return out.join('\n');
}

/**
 * A MONITOR connection. ioredis marks a connection as monitoring only after MONITOR's OK has been
 * handled (a promise later), so a command Redis ran right after it, read in the same chunk, was
 * taken for a reply to nothing ("Command queue state error": a CI run failed on it with services
 * polling Redis). Marked at once instead: 'ready' is emitted on the tick after MONITOR is written.
 */
export async function monitorOf(client: Redis): Promise<Redis> {
  const m = client.duplicate({ monitor: true, lazyConnect: true });
  m.once('ready', () => {
    (m as unknown as { status: string }).status = 'monitoring';
  });
  const monitoring = once(m, 'monitoring');
  await m.connect();
  await monitoring;
  return m;
}
