// `deepq up`'s plain word on Redis: its children log JSON lines about a Redis they cannot reach,
// which a person starting deepq for the first time does not read as "start Redis". The
// supervisor checks once and says so in plain text, then again when Redis answers.
import { connectHint } from '../shared/runtime/redis-hints.ts';
import { safeLine } from './terminal.ts';

const FIRST_CHECK_MS = 3000;

export async function tellWhileRedisAway(url: string, print: (line: string) => void): Promise<() => void> {
  const [{ Redis }, { redactUrl }] = await Promise.all([import('ioredis'), import('../shared/runtime/config.ts')]);
  let last = '';
  let told = false;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 1000 });
  redis.on('error', (err: Error) => {
    last = err.message;
  });
  const close = () => redis.disconnect();
  redis.once('ready', () => {
    if (told) print(`deepq up: Redis at ${redactUrl(url)} answers now: the services start`);
    close();
  });
  redis.connect().catch(() => {});
  setTimeout(() => {
    if (redis.status === 'ready' || redis.status === 'end') return;
    told = true;
    const why = last ? ` (${safeLine(last)}${connectHint(last)})` : '';
    print(
      `deepq up: cannot reach Redis at ${redactUrl(url)}${why}: the services wait for it; start it, or set REDIS_URL`,
    );
  }, FIRST_CHECK_MS).unref();
  return close;
}
