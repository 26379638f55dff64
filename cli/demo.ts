// `npm run demo`: one goal end to end, every service its own process. Uses REDIS_URL, or
// the Redis on 127.0.0.1:6379, or a private redis-server it starts and removes.
import type { Config } from '../shared/runtime/config.ts';
import { loadConfig } from '../shared/runtime/config.ts';
import { GoalClient } from '../shared/goal/client.ts';
import { hasRedisServer, portAnswers, startPrivateRedis, type PrivateRedis } from './private-redis.ts';
import { planChildren, supervise } from './supervisor.ts';
import { formatEventLine } from './timeline.ts';

export async function runDemo(goalText: string, out: (s: string) => void = (s) => process.stdout.write(s + '\n')): Promise<number> {
  let priv: PrivateRedis | undefined;
  const env: NodeJS.ProcessEnv = {};
  // The local port the demo looks at before starting its own Redis (tests point it elsewhere).
  const localPort = Number(process.env.DEEPQ_DEMO_REDIS_PORT ?? 6379);
  if (!process.env.REDIS_URL && !(await portAnswers(localPort))) {
    if (!hasRedisServer()) {
      out(`deepq demo: no Redis answers on 127.0.0.1:${localPort} and no redis-server is on PATH.`);
      out('Install one (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis) or set REDIS_URL.');
      return 1;
    }
    priv = await startPrivateRedis();
    env.REDIS_URL = priv.url;
    out(`deepq demo: started a private redis-server on port ${priv.port}`);
  }
  const cfg: Config = loadConfig({ ...process.env, ...env });
  if (cfg.providerNotice) out(cfg.providerNotice);
  const sup = supervise(planChildren(cfg.roles.map((r) => r.name), 0), { env: { ...env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' } });
  const client = new GoalClient(cfg);
  try {
    const goalId = await client.enqueue({ goal: goalText });
    out(`goal ${goalId}: ${goalText}`);
    let last = '-';
    let t0 = Date.now();
    for (;;) {
      for (const { id, event } of await client.goals.events(goalId, last)) {
        last = id;
        if (event.type === 'created') t0 = event.at;
        out(formatEventLine(event, t0));
      }
      const g = await client.get(goalId);
      if (['done', 'failed', 'cancelled', 'budget_exceeded', 'awaiting_human'].includes(g.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const { id, event } of await client.goals.events(goalId, last)) {
      last = id;
      out(formatEventLine(event, t0));
    }
    const g = await client.get(goalId);
    out('');
    out(`final plan (cycle ${g.planStep}): ${JSON.stringify(g.plan)}`);
    out(`status: ${g.status}${g.reason ? ` (${g.reason})` : ''}`);
    out('artifacts:');
    for (const f of await client.artifacts(goalId)) {
      out(`\n=== ${f.name} [${f.status}, ${f.bytes} bytes, ${f.role}, step ${f.step}] ===`);
      out((await client.read(goalId, f.name)) ?? '');
    }
    return g.status === 'done' ? 0 : 1;
  } finally {
    await client.close();
    await sup.stop();
    await priv?.stop();
  }
}
