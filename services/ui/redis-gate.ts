// While Redis is away, a page is answered at once with 503 and why, not held: BullMQ waits for
// its connection to be ready before any command (the queues pages hung until Redis came back),
// and the inspector's own connection fails a command only after its reconnects. A blip shorter
// than READY_WAIT_MS is waited out. The live streams wait for Redis themselves ("waiting for
// Redis…"), and the static files need none.
import type { Context, MiddlewareHandler } from 'hono';
import type { Redis } from 'ioredis';
import type { UiEnv } from './context.ts';

const READY_WAIT_MS = 2000;
const NEEDS_NO_REDIS = /^\/(static\/|favicon\.ico$)|\/events$/;

/** Whether `redis` is ready now or within `ms`. */
export function readyWithin(redis: Redis, ms: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    redis.once('ready', onReady);
  });
}

export function redisGate(redis: Redis, away: (c: Context<UiEnv>) => Response | Promise<Response>) {
  const gate: MiddlewareHandler<UiEnv> = async (c, next) => {
    if (NEEDS_NO_REDIS.test(c.req.path) || (await readyWithin(redis, READY_WAIT_MS))) return next();
    return away(c);
  };
  return gate;
}
