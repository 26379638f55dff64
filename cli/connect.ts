// The CLI's Redis connection: one lazily created GoalClient, and a bounded wait for the first
// connection so that a wrong host, port, password or TLS setting is reported, not waited on.
// cli/main.ts imports this module for closeClient: config, ioredis and the goal client are
// imported when a command first needs them, so `deepq --help` loads none of them.
import type { Redis } from 'ioredis';
import type { Config } from '../shared/runtime/config.ts';
import { connectHint, WRONG_DATABASE, WRONG_PASSWORD } from '../shared/runtime/redis-hints.ts';
import { startTracing, stopTracing } from '../shared/runtime/tracing.ts';
import type { GoalClient } from './goal-client.ts';
import type { GoalReader } from './goal-reader.ts';
import { safeLine } from './terminal.ts';

/** How long a CLI command waits for its first Redis connection before saying so. */
const CONNECT_TIMEOUT_MS = 10_000;
/** After this long without a connection the wait is said, not kept silent for the whole timeout. */
const WAIT_NOTICE_MS = 2000;
const TLS_REFUSED = /certificate|self[- ]signed|ERR_TLS|CERT_|UNABLE_TO_VERIFY|altnames/i;

/**
 * Resolves once the connection is ready; rejects with an error naming the (redacted) URL and
 * the last connection error when it is not within the timeout. Without this a CLI command
 * would wait forever, silently, on a wrong host, port, password or TLS setting.
 */
export async function connected(redis: Redis, url: string, timeoutMs = CONNECT_TIMEOUT_MS): Promise<void> {
  // Imported before the status check: no await may fall between it and the 'ready' listener.
  const { redactUrl } = await import('../shared/runtime/config.ts');
  if (redis.status === 'ready') return;
  let last = '';
  let onError: (err: Error) => void = () => {};
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = () =>
        reject(new Error(`cannot connect to Redis at ${redactUrl(url)}${last ? `: ${last}${connectHint(last)}` : ''}`));
      const t = setTimeout(() => {
        stopTimers();
        last = `no connection within ${timeoutMs / 1000} s${last ? ` (${last})` : ''}`;
        fail();
      }, timeoutMs);
      t.unref();
      const notice = setTimeout(() => {
        const why = last ? ` (${safeLine(last)})` : '';
        process.stderr.write(
          `deepq: waiting for Redis at ${redactUrl(url)}${why}; giving up after ${timeoutMs / 1000} s\n`,
        );
      }, WAIT_NOTICE_MS);
      notice.unref();
      const stopTimers = () => {
        clearTimeout(t);
        clearTimeout(notice);
      };
      onError = (err: Error) => {
        last = err.message;
        // A refused connection may be a Redis still starting; a wrong password or an
        // untrusted certificate will not get better by waiting.
        const what = `${err.message} ${(err as NodeJS.ErrnoException).code ?? ''}`;
        if ([TLS_REFUSED, WRONG_PASSWORD, WRONG_DATABASE].some((permanent) => permanent.test(what))) {
          stopTimers();
          fail();
        }
      };
      redis.on('error', onError);
      redis.once('ready', () => {
        stopTimers();
        resolve();
      });
    });
  } finally {
    redis.off('error', onError);
  }
}

let clientRef: GoalClient | undefined;
let readerRef: GoalReader | undefined;
let connectionRef: { cfg: Config; redis: Redis } | undefined;
let tracingOwned = false;
let stopLostGuard: (() => void) | undefined;

/** A one-shot command stops, saying so, once Redis has been gone ONE_SHOT_LOST_LIMIT_MS. */
async function guardOneShot(redis: Redis, url: string): Promise<void> {
  if (stopLostGuard) return;
  const [{ redactUrl }, { guardLostRedis, ONE_SHOT_LOST_LIMIT_MS: limit }] = await Promise.all([
    import('../shared/runtime/config.ts'),
    import('./lost-redis-guard.ts'),
  ]);
  stopLostGuard ??= guardLostRedis(redis, limit, (last) => {
    const why = last ? ` (${safeLine(last)})` : '';
    process.stderr.write(
      `deepq: error: lost Redis at ${redactUrl(url)} for ${limit / 1000} s${why}: stopped. ` +
        'What the command was doing may or may not have been done: deepq status tells.\n',
    );
    process.exit(1);
  });
}

/** `watch` and `enqueue --wait` follow with their own limit (--redis-timeout) from here on. */
export function followingOnItsOwn(): void {
  stopLostGuard?.();
}

/** The process's config and Redis connection, without the goal client (no BullMQ loaded). */
export async function connection(): Promise<{ cfg: Config; redis: Redis }> {
  if (!connectionRef) {
    const [{ loadConfig }, { createRedis }] = await Promise.all([
      import('../shared/runtime/config.ts'),
      import('../shared/runtime/redis.ts'),
    ]);
    const cfg = loadConfig();
    if (cfg.envNotice) process.stderr.write(`${safeLine(cfg.envNotice)}\n`);
    connectionRef ??= { cfg, redis: createRedis(cfg.redisUrl, 'deepq:cli') };
  }
  await connected(connectionRef.redis, connectionRef.cfg.redisUrl);
  await guardOneShot(connectionRef.redis, connectionRef.cfg.redisUrl);
  return connectionRef;
}

/** The process's GoalClient, created on first use so that commands without Redis need none. */
export async function client(): Promise<GoalClient> {
  if (!clientRef) {
    const [{ cfg, redis }, { GoalClient }] = await Promise.all([connection(), import('./goal-client.ts')]);
    // Before its queues are made (they take BullMQ's telemetry then): an enqueue starts the goal's trace.
    tracingOwned ||= await startTracing('cli');
    clientRef ??= new GoalClient(cfg, redis);
  }
  await connected(clientRef.redis, clientRef.cfg.redisUrl);
  return clientRef;
}

/** A read-only view of goals (no BullMQ loaded): the client when one exists, else its own. */
export async function reader(): Promise<GoalReader> {
  if (clientRef) return client();
  if (!readerRef) {
    const [{ cfg, redis }, { GoalReader }] = await Promise.all([connection(), import('./goal-reader.ts')]);
    readerRef ??= new GoalReader(cfg, redis);
  }
  await connected(readerRef.redis, readerRef.cfg.redisUrl);
  return readerRef;
}

/** Closes the client (or the bare connection) if a command created one; a no-op otherwise. */
export async function closeClient(): Promise<void> {
  // Closing is no loss of Redis.
  stopLostGuard?.();
  if (clientRef) await clientRef.close();
  else connectionRef?.redis.disconnect();
  // Only the client's own: a service command returns here while its service (and tracing) runs on.
  if (tracingOwned) await stopTracing();
}
