// /metrics, /healthz (the process is alive) and /readyz (Redis reachable, worker running).
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface OpsServerOptions {
  port: number;
  registry: Registry;
  ready: () => Promise<{ ok: boolean; checks: Record<string, boolean> }>;
  /** Runs before each scrape (e.g. refresh queue-depth gauges). */
  beforeScrape?: () => Promise<void>;
}

export async function startOpsServer(opts: OpsServerOptions): Promise<{ server: Server; port: number }> {
  const server = createServer(async (req, res) => {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/metrics') {
        await opts.beforeScrape?.().catch(() => {});
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
    server.once('error', reject);
    server.listen(opts.port, '0.0.0.0', () => resolve());
  });
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : opts.port };
}
