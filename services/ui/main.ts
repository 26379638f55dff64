// `deepq ui`: the web inspector. It reads and acts through Redis alone (no state of its own,
// so any number of replicas), serves the app on --host/--port and, like every deepq process,
// /metrics, /healthz and /readyz on METRICS_PORT.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Logger } from 'pino';
import { GoalClient } from '../../cli/goal-client.ts';
import { portInUse, reachableUrl } from '../../shared/runtime/addresses.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { createLogger } from '../../shared/runtime/logger.ts';
import { startOpsServer } from '../../shared/runtime/ops-server.ts';
import { createRedis, pingRedis } from '../../shared/runtime/redis.ts';
import { secretsOf } from '../../shared/runtime/runtime.ts';
import { stopOnSignals } from '../../shared/runtime/service.ts';
import { startTracing, stopTracing } from '../../shared/runtime/tracing.ts';
import { DirBlobStore } from '../../shared/vfs/blob-store.ts';
import { createApp } from './app.ts';
import type { UiContext } from './context.ts';
import { refreshUiGauges, UiMetrics } from './metrics.ts';
import { UiSessions } from './security/auth.ts';
import { checkBindPolicy } from './security/bind-policy.ts';
import { SignInThrottle } from './security/sign-in-throttle.ts';
import { StreamHub } from './stream-hub.ts';

export interface UiOptions {
  host: string;
  port: number;
  token?: string;
}

export interface RunningUi {
  /** Where to open it. */
  url: string;
  port: number;
  metricsPort: number;
  drainTimeoutMs: number;
  log: Logger;
  stop(): Promise<void>;
}

function listen(ctx: UiContext, opts: UiOptions): Promise<Server> {
  const app = createApp(ctx);
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: opts.port, hostname: opts.host }, () => resolve(server as Server));
    server.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE' ? portTaken(opts) : err));
  });
}

function portTaken(opts: UiOptions) {
  return portInUse('port', opts.port, opts.host, 'another deepq ui, or another server', 'pick another with --port');
}

export async function startUi(cfg: Config, opts: UiOptions): Promise<RunningUi> {
  checkBindPolicy(opts.host, opts.token);
  const secrets = [...secretsOf(cfg), ...(opts.token ? [opts.token] : [])];
  const log = createLogger(cfg.logLevel, { service: 'ui' }, secrets);
  // A misspelt DEEPQ_* variable is named, as every other command names it.
  if (cfg.envNotice) log.warn(cfg.envNotice);
  const metrics = new UiMetrics();
  // Before the client's queues are made: a goal enqueued from the page starts its trace here.
  await startTracing('ui', log, process.env, secrets);
  // Requests are answered, with an error page, while Redis is away: none waits for it.
  const redis = createRedis(cfg.redisUrl, 'deepq:ui', { autoPipelining: true, failFast: true });
  const client = new GoalClient(cfg, redis, { failFast: true });
  // One blocking connection per followed goal, never the shared one (a blocked connection
  // answers nothing else).
  const hub = new StreamHub(client.redis, () => createRedis(cfg.redisUrl, 'deepq:ui:stream'), log);
  const ctx: UiContext = {
    cfg,
    client,
    blobs: new DirBlobStore(cfg.vfs.blobDir, cfg.prefix),
    hub,
    log,
    metrics,
    token: opts.token,
    sessions: opts.token ? new UiSessions(client.redis, cfg.prefix, opts.token) : undefined,
    signIn: new SignInThrottle(client.redis, cfg.prefix, {
      maxFailures: cfg.uiSignInMaxFailures,
      windowSeconds: cfg.uiSignInWindowSeconds,
    }),
    liveStreams: new Set(),
  };
  const server = await listen(ctx, opts);
  const ops = await startOpsServer({
    port: cfg.metricsPort,
    host: cfg.metricsHost,
    registry: metrics.registry,
    // deepq_redis_up, as every service reports it (left at 0, it fired the critical alert).
    beforeScrape: () => refreshUiGauges(metrics.base, client),
    ready: async () => {
      const checks = { redis: await pingRedis(client.redis), http: server.listening };
      return { ok: checks.redis && checks.http, checks };
    },
  });
  const port = (server.address() as AddressInfo).port;
  const url = reachableUrl(opts.host, port);
  log.info({ host: opts.host, port, metricsPort: ops.port, auth: opts.token ? 'token' : 'none' }, 'ui started');
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      // Live streams hold their connections open: end them, then close what is left.
      for (const s of ctx.liveStreams) s.close();
      hub.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await new Promise<void>((r) => ops.server.close(() => r()));
      await client.close();
      await stopTracing();
      log.info('stopped');
    })();
    return stopped;
  };
  return { url, port, metricsPort: ops.port, drainTimeoutMs: cfg.drainTimeoutMs, log, stop };
}

export async function main(cfg: Config, opts: UiOptions): Promise<RunningUi> {
  const ui = await startUi(cfg, opts);
  stopOnSignals(ui, ui.log);
  return ui;
}
