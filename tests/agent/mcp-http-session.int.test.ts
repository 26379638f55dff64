// An HTTP MCP connection given up on while its server still runs (a ping that timed out behind a
// slow link) ends its session at the server (DELETE with the session id) before it reconnects,
// as closing does: the server does not keep the abandoned session, and its subscriptions, open.
// Real @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that can slow
// every request.

import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { McpConnection } from '../../shared/agent/mcp/index.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { type EverythingHttp, freePort, startEverythingHttp, until } from './mcp-harness.ts';

let web: EverythingHttp | undefined;
after(() => web?.stop());

/** A proxy that records each request's method and session id, delaying each by `delayMs`. */
async function slowableProxy(target: number) {
  const seen: { method: string; session?: string }[] = [];
  const state = { delayMs: 0 };
  const srv = createServer((req, res) => {
    const session = req.headers['mcp-session-id'];
    seen.push({ method: req.method!, session: typeof session === 'string' ? session : undefined });
    setTimeout(() => {
      const up = request(
        { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    }, state.delayMs);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  srv.unref();
  return { port: (srv.address() as AddressInfo).port, seen, state };
}

test('a session given up on after a ping timeout is ended at the server before the reconnect', async (t) => {
  web = await startEverythingHttp(await freePort());
  const proxy = await slowableProxy(web.port);
  const { logger, raw } = captureLogger('debug');
  const url = new URL(`http://127.0.0.1:${proxy.port}/mcp`);
  const conn = new McpConnection(
    { type: 'http', name: 'web', url, headers: {}, timeoutMs: 10_000 },
    { log: logger, scrub: (s) => s, backoff: { baseMs: 1500, maxMs: 1500 }, pingIntervalMs: 100, pingTimeoutMs: 300 },
  );
  conn.start();
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const first = await until(() => proxy.seen.find((r) => r.session)?.session, 5000, 'a session id in use');
  // Every request now takes longer than the ping timeout: the connection is given up on.
  proxy.state.delayMs = 700;
  await until(() => /connection lost: ping failed/.test(raw()), 10_000, 'the lost connection logged');
  proxy.state.delayMs = 0;
  await until(() => proxy.seen.some((r) => r.method === 'DELETE'), 5000, 'a DELETE of the old session');
  assert.deepEqual(
    proxy.seen.filter((r) => r.method === 'DELETE').map((r) => r.session),
    [first],
    'the old session, once',
  );
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const now = proxy.seen.at(-1)?.session;
  assert.ok(now && now !== first, 'reconnected with a new session');
});
