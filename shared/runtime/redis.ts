// Redis connections. BullMQ needs maxRetriesPerRequest: null on its connections so that
// blocking commands survive a Redis restart; ioredis reconnects by itself.
import { Redis } from 'ioredis';
import { ConfigError } from '../errors.ts';
import { redactUrl } from './config.ts';
import { databaseHint, passwordHint, redisRefusal, WRONG_DATABASE, WRONG_PASSWORD } from './redis-hints.ts';
import { defineScripts } from './scripts.ts';

export function createRedis(
  url: string,
  name?: string,
  opts: { autoPipelining?: boolean; scripts?: boolean; failFast?: boolean } = {},
): Redis {
  const client = new Redis(url, {
    // failFast (a web request's connection): a command fails after 2 reconnects (about a second
    // with Redis down) instead of waiting for Redis, so the page says why rather than hanging.
    maxRetriesPerRequest: opts.failFast ? 2 : null,
    connectionName: name,
    // Commands issued in the same tick go out in one write.
    enableAutoPipelining: opts.autoPipelining ?? false,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    // A closing connection whose socket does not close (Redis gone, or never reached) is destroyed
    // after 200 ms, not ioredis's 2 s: that timer held every process closing while Redis was away.
    disconnectTimeout: 200,
    // rediss:// turns TLS on by itself in ioredis.
  });
  // Errors surface through readiness and job failures; an unhandled 'error' event would crash.
  client.on('error', () => {});
  refuseWrongSettings(client, url);
  // Not on BullMQ's connection: each of its flows is a Pipeline, which copies every defined
  // script onto itself (BullMQ's own seventy and these).
  if (opts.scripts !== false) defineScripts(client);
  return client;
}

/**
 * ioredis only reports a refused SELECT (a database number past the server's) and goes on in
 * database 0, among whatever else lives there. The refusal comes before the connection is ready,
 * so closing it then lets no command through: every one fails, and the process says why. A
 * refused password is kept as the reason too (ioredis retries it, in case Redis changes).
 */
function refuseWrongSettings(client: Redis, url: string): void {
  client.on('error', (err: Error) => {
    if (client.status === 'end') return;
    const where = `Redis at ${redactUrl(url)}`;
    if (WRONG_PASSWORD.test(err.message))
      redisRefusal(new ConfigError(`${where} refused its password: ${err.message}${passwordHint(err.message)}`));
    if (!WRONG_DATABASE.test(err.message)) return;
    client.disconnect();
    redisRefusal(new ConfigError(`${where} refused its database: ${err.message}${databaseHint(err.message)}`), true);
  });
}

export async function pingRedis(client: Redis, timeoutMs = 1000): Promise<boolean> {
  if (client.status !== 'ready') return false;
  try {
    const res = await Promise.race([
      client.ping(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), timeoutMs).unref()),
    ]);
    return res === 'PONG';
  } catch {
    return false;
  }
}

/**
 * Redis's eviction policy, from INFO (CONFIG may be disabled on managed Redis). Anything but
 * noeviction lets Redis drop keys under memory pressure: a goal, a queue, the sweep's schedule.
 */
export async function evictionPolicy(client: Redis): Promise<string | undefined> {
  const info = await client.info('memory');
  return /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
}
