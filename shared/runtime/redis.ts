// Redis connections. BullMQ needs maxRetriesPerRequest: null on its connections so that
// blocking commands survive a Redis restart; ioredis reconnects by itself.
import { Redis } from 'ioredis';
import { defineScripts } from './scripts.ts';

export function createRedis(
  url: string,
  name?: string,
  opts: { autoPipelining?: boolean; scripts?: boolean } = {},
): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: null,
    connectionName: name,
    // Commands issued in the same tick go out in one write.
    enableAutoPipelining: opts.autoPipelining ?? false,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    // rediss:// turns TLS on by itself in ioredis.
  });
  // Errors surface through readiness and job failures; an unhandled 'error' event would crash.
  client.on('error', () => {});
  // Not on BullMQ's connection: each of its flows is a Pipeline, which copies every defined
  // script onto itself (BullMQ's own seventy and these).
  if (opts.scripts !== false) defineScripts(client);
  return client;
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
