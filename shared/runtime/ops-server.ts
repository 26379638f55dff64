// /metrics, /healthz (the process is alive) and /readyz (Redis reachable, worker running).
// Bound to `metricsHost` (loopback unless the deployment says otherwise: containers set 0.0.0.0).
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { ConfigError } from '../errors.ts';
import { portInUse } from './addresses.ts';

export interface OpsServerOptions {
  port: number;
  /** Address to bind (default 127.0.0.1: only this host can scrape). */
  host?: string;
  registry: Registry;
  ready: () => Promise<{ ok: boolean; checks: Record<string, boolean> }>;
  /** Runs before a scrape (e.g. refresh queue-depth gauges): at most one at a time, and not
   *  again within `refreshTtlMs` of the last one that finished. */
  beforeScrape?: () => Promise<void>;
  /** How long a finished refresh serves later scrapes (default 1000 ms). */
  refreshTtlMs?: number;
  /** A scrape waits this long for a refresh, then serves the gauges it has (default 5000 ms). */
  refreshWaitMs?: number;
}

export const DEFAULT_METRICS_HOST = '127.0.0.1';

/**
 * Coalesces a refresh: concurrent callers share the one in flight, and a caller within `ttlMs`
 * of the last finished refresh reuses it. A failed refresh is not cached (the next scrape
 * retries). Each caller waits at most `waitMs`; the refresh itself carries on.
 */
export function coalescedRefresh(refresh: () => Promise<void>, ttlMs = 1000, waitMs = 5000): () => Promise<void> {
  let inFlight: Promise<void> | undefined;
  let freshUntil = 0;
  const start = () => {
    inFlight ??= Promise.resolve()
      .then(refresh)
      .then(
        () => {
          freshUntil = Date.now() + ttlMs;
          inFlight = undefined;
        },
        () => {
          inFlight = undefined;
        },
      );
    return inFlight;
  };
  return async () => {
    if (!inFlight && Date.now() < freshUntil) return;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((r) => {
      timer = setTimeout(r, waitMs).unref();
    });
    await Promise.race([start(), waited]);
    clearTimeout(timer);
  };
}

export async function startOpsServer(opts: OpsServerOptions): Promise<{ server: Server; port: number; host: string }> {
  const host = opts.host ?? DEFAULT_METRICS_HOST;
  const refresh = opts.beforeScrape
    ? coalescedRefresh(opts.beforeScrape, opts.refreshTtlMs, opts.refreshWaitMs)
    : undefined;
  const server = createServer(async (req, res) => {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/metrics') {
        await refresh?.();
        res.writeHead(200, { 'content-type': opts.registry.contentType });
        res.end(await opts.registry.metrics());
      } else if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true }));
      } else if (path === '/readyz') {
        const r = await opts.ready();
        res.writeHead(r.ok ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify(r));
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found\n');
      }
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`error: ${(err as Error).message}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(listenError(err, opts.port, host)));
    server.listen(opts.port, host, () => resolve());
  });
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : opts.port, host };
}

/** What retrying cannot mend is a config error (exit 78), naming the setting to change. */
function listenError(err: NodeJS.ErrnoException, port: number, host: string): Error {
  if (err.code === 'EADDRINUSE') {
    const fix = 'pick another with METRICS_PORT, or with --metrics-port-base for deepq up';
    return portInUse('metrics port', port, host, 'another deepq up, or a service', fix);
  }
  const why = { ENOTFOUND: 'no such host', EADDRNOTAVAIL: 'not an address of this machine' }[err.code ?? ''];
  if (why) return new ConfigError(`METRICS_HOST ${JSON.stringify(host)}: cannot listen there (${why})`);
  return err;
}
