// An HTTP MCP connection given up on while its server still runs (a ping that timed out behind a
// slow link) ends its session at the server (DELETE with the session id) before it reconnects,
// as closing does: the server does not keep the abandoned session, and its subscriptions, open.
// Real @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that can slow
// every request.

import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, test } from 'node:test';
import { captureLogger } from '../../testing/agent-harness.ts';
import { type EverythingHttp, freePort, httpConnection, startEverythingHttp, testProxy, until } from './mcp-harness.ts';

let web: EverythingHttp | undefined;
after(() => web?.stop());

test('a session given up on after a ping timeout is ended at the server before the reconnect', async (t) => {
  web = await startEverythingHttp(await freePort());
  // Records each request's method and session id, and delays it by `delayMs`.
  const seen: { method: string; session?: string }[] = [];
  let delayMs = 0;
  const onRequest = (req: IncomingMessage) => {
    const session = req.headers['mcp-session-id'];
    seen.push({ method: req.method!, session: typeof session === 'string' ? session : undefined });
  };
  const port = await testProxy(web.port, { onRequest, delayMs: () => delayMs });
  const { logger, raw } = captureLogger('debug');
  const timing = { backoff: { baseMs: 1500, maxMs: 1500 }, pingIntervalMs: 100, pingTimeoutMs: 300 };
  const conn = httpConnection(port, logger, timing);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const first = await until(() => seen.find((r) => r.session)?.session, 5000, 'a session id in use');
  // Every request now takes longer than the ping timeout: the connection is given up on.
  delayMs = 700;
  await until(() => /connection lost: ping failed/.test(raw()), 10_000, 'the lost connection logged');
  delayMs = 0;
  await until(() => seen.some((r) => r.method === 'DELETE'), 5000, 'a DELETE of the old session');
  assert.deepEqual(
    seen.filter((r) => r.method === 'DELETE').map((r) => r.session),
    [first],
    'the old session, once',
  );
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const now = seen.at(-1)?.session;
  assert.ok(now && now !== first, 'reconnected with a new session');
});
