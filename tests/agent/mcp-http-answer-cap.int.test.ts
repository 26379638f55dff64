// An HTTP MCP server answering a call with far more than any tool result may hold: the worker
// reads at most 10 MiB of the answer and stops the download, rather than taking the whole answer
// into memory first (400 MB took 1.8 GB); the next call works. The server is
// the real @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that inflates
// its echo answer to 64 MiB.

import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { McpConnection } from '../../shared/agent/mcp/index.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { type EverythingHttp, freePort, startEverythingHttp } from './mcp-harness.ts';

const INFLATED = 64 * 1024 * 1024;
let web: EverythingHttp | undefined;
after(() => web?.stop());

/** Forwards everything; an answer holding `Echo: inflate` goes out with that text 64 MiB long. */
async function inflatingProxy(target: number) {
  const stats = { sent: 0, closedEarly: false };
  const srv = createServer((req, res) => {
    const up = request(
      { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers },
      (r) => {
        if (req.method !== 'POST') {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
          return;
        }
        const parts: Buffer[] = [];
        r.on('data', (d: Buffer) => parts.push(d));
        r.on('end', () => void answer(res, r.statusCode ?? 502, r.headers, Buffer.concat(parts).toString()));
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  const answer = async (res: import('node:http').ServerResponse, status: number, headers: object, body: string) => {
    const at = body.indexOf('Echo: inflate');
    const { 'content-length': _drop, ...rest } = headers as Record<string, string>;
    res.writeHead(status, rest);
    if (at < 0) return res.end(body);
    res.on('close', () => (stats.closedEarly = !res.writableFinished));
    res.write(body.slice(0, at + 'Echo: '.length));
    const chunk = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < INFLATED / chunk.length && !res.destroyed; i++) {
      stats.sent += chunk.length;
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r).once('close', r));
    }
    res.end(body.slice(at + 'Echo: '.length));
  };
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  srv.unref();
  return { port: (srv.address() as AddressInfo).port, stats };
}

test('an answer far over the cap is given up while it downloads; the next call works', async (t) => {
  web = await startEverythingHttp(await freePort());
  const proxy = await inflatingProxy(web.port);
  const { logger } = captureLogger('debug');
  const url = new URL(`http://127.0.0.1:${proxy.port}/mcp`);
  const conn = new McpConnection(
    { type: 'http', name: 'web', url, headers: {}, timeoutMs: 8000 },
    { log: logger, scrub: (s) => s, backoff: { baseMs: 200, maxMs: 200 } },
  );
  conn.start();
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  // The SDK may then fetch the answer again from the server's event store (the original, short).
  const got = await conn.call('echo', { message: 'inflate' }).then(
    (r) => JSON.stringify(r.content),
    (err: Error) => err.message,
  );
  assert.ok(got.length < 1024 * 1024, `the inflated answer was taken whole: ${got.length} chars`);
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(proxy.stats.closedEarly, 'the download was stopped');
  assert.ok(proxy.stats.sent < INFLATED / 2, `${proxy.stats.sent} bytes sent before the download stopped`);
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const ok = await conn.call('echo', { message: 'hi' });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'Echo: hi' }]);
});
