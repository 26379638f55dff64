// `npm run demo`: one goal end to end, every service its own process. Uses REDIS_URL, or
// the Redis on 127.0.0.1:6379, or a private redis-server it starts and removes. What the
// user and the model wrote is printed with its control characters escaped (cli/terminal.ts).

import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../shared/errors.ts';
import type { GoalRecord } from '../shared/goal/store.ts';
import type { Config } from '../shared/runtime/config.ts';
import { loadConfig } from '../shared/runtime/config.ts';
import { parseOrThrow } from '../shared/zod.ts';
import { connected } from './connect.ts';
import { GoalClient } from './goal-client.ts';
import { GoalRequestSchema } from './goal-request.ts';
import { hasRedisServer, type PrivateRedis, portAnswers, startPrivateRedis } from './private-redis.ts';
import { planChildren, type Supervisor, supervise } from './supervisor.ts';
import { safeJson, safeLine, safeText } from './terminal.ts';
import { formatEventLine } from './timeline.ts';

type Out = (s: string) => void;

const INSTALL_REDIS =
  'Install one (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis) or set REDIS_URL.';

export async function runDemo(goalText: string, out: Out = (s) => process.stdout.write(`${s}\n`)): Promise<number> {
  // A goal text enqueue would refuse is refused before any Redis or service starts.
  parseOrThrow(GoalRequestSchema, { goal: goalText }, 'goal request');
  // A setting the services would refuse is refused before a private Redis starts (and is left).
  loadConfig(process.env);
  const redis = await demoRedis(out, demoRedisPort());
  if (!redis) return 1;
  const { env, priv } = redis;
  const cfg: Config = loadConfig({ ...process.env, ...env });
  const client = new GoalClient(cfg);
  let sup: Supervisor | undefined;
  // Once, whoever asks first (the run's end or a signal): the children drain while Redis is
  // still there, then the private Redis goes.
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      await client.close();
      await sup?.stop(cfg.drainTimeoutMs + 5000);
      await priv?.stop();
    })());
  const started: { goalId?: string; cancelling?: Promise<void> } = {};
  const offSignals = stopOnSignals(async () => {
    // In a Redis that outlives the demo (REDIS_URL, the local one), a goal left running would be
    // taken up by the next services started on it: a stopped demo's goal ends cancelled.
    if (started.goalId) started.cancelling = cancelOnStop(client, started.goalId);
    await started.cancelling;
    await stopAll();
  });
  try {
    // Before any service starts: an unreachable REDIS_URL is reported, not waited on, and
    // leaves no children behind.
    await connected(client.redis, cfg.redisUrl);
    if (cfg.providerNotice) out(cfg.providerNotice);
    const roles = cfg.roles.map((r) => r.name);
    // The services' logs would drown the timeline: errors only, unless LOG_LEVEL says otherwise.
    sup = supervise(planChildren(roles, 0), { env: { ...env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' } });
    return await runGoal(client, goalText, out, (goalId) => (started.goalId = goalId));
  } finally {
    offSignals();
    // The timeline ends as soon as the cancel lands; the cancel then removes the goal's waiting
    // jobs, which needs the connection a stop would close under it.
    await started.cancelling;
    await stopAll();
  }
}

/**
 * Ctrl-C or SIGTERM (or a closed terminal) stops the services and the private Redis before the
 * demo exits: without it Node would exit at once, leaving its children running. Returns the
 * function that removes the handlers.
 */
function stopOnSignals(stopAll: () => Promise<void>): () => void {
  let caught = false;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal while stopping must not start a second stop.
    if (caught) return;
    caught = true;
    process.stderr.write(`deepq demo: ${signal}: stopping the services…\n`);
    void stopAll().finally(() => process.exit(128 + (osConstants.signals[signal] ?? 1)));
  };
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const s of signals) process.on(s, onSignal);
  return () => {
    for (const s of signals) process.off(s, onSignal);
  };
}

/** Cancels the demo's goal unless it has ended; says so, or why it could not. */
async function cancelOnStop(client: GoalClient, goalId: string): Promise<void> {
  try {
    const { cancelled } = await client.cancel(goalId);
    if (cancelled) process.stderr.write(`deepq demo: goal ${goalId} cancelled\n`);
  } catch (err) {
    process.stderr.write(`deepq demo: goal ${goalId} was not cancelled: ${safeLine((err as Error).message)}\n`);
  }
}

/** Enqueues the goal, prints its timeline, plan, status and artifacts; 0 when it is done. */
async function runGoal(client: GoalClient, goalText: string, out: Out, onEnqueued: (id: string) => void) {
  const goalId = await client.enqueue({ goal: goalText });
  onEnqueued(goalId);
  out(`goal ${goalId}: ${safeLine(goalText)}`);
  const g = await printTimeline(client, goalId, out);
  out('');
  out(`final plan (cycle ${g.planStep}): ${safeJson(g.plan)}`);
  out(safeLine(`status: ${g.status}${g.reason ? ` (${g.reason})` : ''}`));
  out('artifacts:');
  for (const f of await client.artifacts(goalId)) {
    out(`\n${safeLine(`=== ${f.name} [${f.status}, ${f.bytes} bytes, ${f.role}, step ${f.step}] ===`)}`);
    // Contents keep their line breaks and tabs; every other control character is escaped.
    out(safeText((await client.read(goalId, f.name)) ?? ''));
  }
  return g.status === 'done' ? 0 : 1;
}

/** The local port the demo looks at before starting its own Redis: DEEPQ_DEMO_REDIS_PORT, else 6379. */
function demoRedisPort(): number {
  const raw = process.env.DEEPQ_DEMO_REDIS_PORT;
  if (raw === undefined || raw === '') return 6379;
  const port = Number(raw);
  if (!/^[0-9]+$/.test(raw) || port < 1 || port > 65535)
    throw new ConfigError(`invalid environment variable DEEPQ_DEMO_REDIS_PORT=${JSON.stringify(raw)}: a port, 1-65535`);
  return port;
}

/**
 * The Redis the demo uses: REDIS_URL, else the Redis on the local port if one answers, else a
 * private redis-server (its URL in `env`). Undefined, having said why, when there is none to be had.
 */
async function demoRedis(
  out: Out,
  localPort: number,
): Promise<{ env: NodeJS.ProcessEnv; priv?: PrivateRedis } | undefined> {
  if (process.env.REDIS_URL) return { env: {} };
  if (await portAnswers(localPort)) return { env: { REDIS_URL: `redis://127.0.0.1:${localPort}` } };
  if (!hasRedisServer()) {
    out(`deepq demo: no Redis answers on 127.0.0.1:${localPort} and no redis-server is on PATH.`);
    out(INSTALL_REDIS);
    return undefined;
  }
  // Its own process group: the terminal's Ctrl-C must not stop it under the services, which
  // the demo stops first.
  const priv = await startPrivateRedis({ ownProcessGroup: true });
  out(`deepq demo: started a private redis-server on port ${priv.port}`);
  // Its spilled artifacts go with it: in the default blob dir, a deployment's sweep elsewhere
  // (another Redis, the same dir) would find them orphaned, as this demo's would find that one's.
  const blobs = process.env.DEEPQ_BLOB_DIR ? {} : { DEEPQ_BLOB_DIR: join(priv.dir, 'blobs') };
  return { env: { REDIS_URL: priv.url, ...blobs }, priv };
}

/** Prints one line per event until the goal is terminal or awaiting a human; returns its record. */
async function printTimeline(client: GoalClient, goalId: string, out: Out): Promise<GoalRecord> {
  let t0 = Date.now();
  let last: GoalRecord | undefined;
  for await (const { events, goal } of client.follow(goalId)) {
    for (const { event } of events) {
      // Times are relative to the goal's creation, not to when the demo started watching.
      if (event.type === 'created') t0 = event.at;
      out(formatEventLine(event, t0, goalId));
    }
    last = goal;
  }
  // follow() always yields at least once and ends only after a settled batch.
  if (!last) throw new Error(`stopped following goal ${goalId}`);
  return last;
}
