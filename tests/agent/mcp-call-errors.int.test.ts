// One failed call is no verdict on its connection: a gateway's HTTP 429 on one request, or a
// JSON-RPC error -32000 (the code servers commonly give any tool failure), fails that call only.
// The session stays, and another job's call in flight on it finishes (they were taken for a lost
// connection: the session was ended and every call on it failed). The server is the real
// @modelcontextprotocol/server-everything (streamableHttp) behind a gateway that answers so.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { McpManager, resolveRoleServers } from '../../shared/agent/mcp/manager.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { type EverythingHttp, freePort, httpConnection, startEverythingHttp } from './mcp-harness.ts';

let web: EverythingHttp | undefined;
after(() => web?.stop());

type Refusal = (body: { id?: unknown }) => { status: number; body: string };
type Answer = (req: IncomingMessage, body: Buffer) => { status: number; body: string } | undefined;

/** A `get-sum` call answered with `refuse`. */
const refusingSum =
  (refuse: Refusal): Answer =>
  (req, body) =>
    req.method === 'POST' && body.includes('"get-sum"')
      ? refuse(JSON.parse(body.toString()) as { id?: unknown })
      : undefined;

/** A gateway in front of `target` that answers what `answer` gives for itself; counts sessions begun. */
async function gateway(target: number, answer: Answer): Promise<{ port: number; initializes: () => number }> {
  let initializes = 0;
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (body.includes('"initialize"')) initializes++;
      const own = answer(req, body);
      if (own) {
        res.writeHead(own.status, { 'content-type': 'application/json' });
        return res.end(own.body);
      }
      const forward = { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers };
      const up = request(forward, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  srv.unref();
  return { port: (srv.address() as AddressInfo).port, initializes: () => initializes };
}

async function refusedBesideALongCall(refuse: Refusal) {
  web ??= await startEverythingHttp(await freePort());
  const gw = await gateway(web.port, refusingSum(refuse));
  const { logger, lines } = captureLogger('debug');
  const conn = httpConnection(gw.port, logger);
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const long = conn.call('trigger-long-running-operation', { duration: 2, steps: 2 }).then(
    (r) => ({ ok: true, text: JSON.stringify(r.content) }),
    (err: Error) => ({ ok: false, text: err.message }),
  );
  await new Promise((r) => setTimeout(r, 300));
  const refused = await conn.call('get-sum', { a: 1, b: 2 }).then(
    () => 'answered',
    (err: Error) => err.message,
  );
  const states = [conn.state];
  const longResult = await long;
  const echo = await conn.call('echo', { message: 'after' });
  states.push(conn.state);
  await conn.close();
  return { refused, longResult, echo, states, initializes: gw.initializes(), log: lines };
}

test('a gateway 429 on one call fails that call; the session and a call in flight go on', async () => {
  const r = await refusedBesideALongCall(() => ({ status: 429, body: 'Too Many Requests' }));
  assert.match(r.refused, /^MCP tool "get-sum" of server "web": the request failed \(.*Too Many Requests/);
  assert.ok(r.longResult.ok, `the call in flight failed: ${r.longResult.text}`);
  assert.match(r.longResult.text, /Long running operation completed/);
  assert.deepEqual(r.echo.content, [{ type: 'text', text: 'Echo: after' }]);
  assert.deepEqual(r.states, ['up', 'up']);
  assert.equal(r.initializes, 1, 'one session, never begun again');
  assert.ok(!r.log.some((l) => /connection lost/.test(String(l.msg))), 'no connection was given up');
});

test('a JSON-RPC error -32000 answered for one call is that call error, not a lost connection', async () => {
  const r = await refusedBesideALongCall(({ id }) => ({
    status: 200,
    body: JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32000, message: 'upstream API failed' } }),
  }));
  assert.equal(r.refused, 'MCP tool "get-sum" of server "web": MCP error -32000: upstream API failed');
  assert.ok(r.longResult.ok, `the call in flight failed: ${r.longResult.text}`);
  assert.deepEqual(r.states, ['up', 'up']);
  assert.equal(r.initializes, 1, 'one session, never begun again');
});

test('a session the server forgot beside a long call is begun again at once, not when the call ends', async () => {
  web ??= await startEverythingHttp(await freePort());
  // The first session the client uses is the one the server forgets, once `forget` is set.
  let first: string | undefined;
  let forget = false;
  const notFound = {
    status: 404,
    body: JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'no session' } }),
  };
  const gw = await gateway(web.port, (req) => {
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') first ??= sid;
    return req.method === 'POST' && forget && sid === first ? notFound : undefined;
  });
  const { logger } = captureLogger('debug');
  const conn = httpConnection(gw.port, logger);
  try {
    await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
    // Its answer streams for 6 s on the old session.
    const long = conn.call('trigger-long-running-operation', { duration: 6, steps: 6 }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(first, 'an HTTP session');
    forget = true;
    const t0 = Date.now();
    await assert.rejects(conn.call('echo', { message: 'refused' }), /the request failed .*no session/);
    await conn.waitFor(() => conn.state === 'up' && gw.initializes() === 2, Date.now() + 4000);
    const echo = await conn.call('echo', { message: 'again' });
    assert.deepEqual(echo.content, [{ type: 'text', text: 'Echo: again' }]);
    assert.ok(Date.now() - t0 < 4000, `begun again after ${Date.now() - t0} ms`);
    await long;
  } finally {
    await conn.close();
  }
});

test('a failed call of a tool that must not run twice tells the model to check its effect', async (t) => {
  web ??= await startEverythingHttp(await freePort());
  // The gateway answers 502 for these calls: the request may or may not have reached the server.
  const badGateway: Answer = (req, body) =>
    req.method === 'POST' && /"(toggle-simulated-logging|echo)"/.test(body.toString())
      ? { status: 502, body: '{"error":"bad gateway"}' }
      : undefined;
  const gw = await gateway(web.port, badGateway);
  const { logger } = captureLogger('debug');
  const servers = {
    web: { type: 'http' as const, url: `http://127.0.0.1:${gw.port}/mcp`, headers: {}, timeoutMs: 10_000 },
  };
  const mcp = new McpManager(resolveRoleServers({ tools: ['mcp:web/*'] }, servers, {}), { log: logger, secrets: [] });
  t.after(() => mcp.close());
  mcp.start();
  await mcp.awaitTools();
  const tool = (label: string) => mcp.tools().find((x) => x.label === label)!;
  const failure = (label: string, input: unknown) =>
    tool(label)
      .run(input)
      .then(
        () => assert.fail(`${label} answered`),
        (err: Error) => err.message,
      );
  const toggled = await failure('mcp:web/toggle-simulated-logging', {});
  assert.match(toggled, /the request failed .*; it may have taken effect \(the tool is not marked read-only/);
  const echoed = await failure('mcp:web/echo', { message: 'x' });
  assert.match(echoed, /the request failed/);
  assert.doesNotMatch(echoed, /may have taken effect/, 'a read-only call');
});
