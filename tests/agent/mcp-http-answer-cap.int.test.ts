// An HTTP MCP server answering a call with far more than any tool result may hold: the worker
// reads at most 10 MiB of the answer and stops the download, rather than taking the whole answer
// into memory first (400 MB took 1.8 GB); the next call works. The server is
// the real @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that inflates
// its echo answer to 64 MiB.

import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, test } from 'node:test';
import { captureLogger } from '../../testing/agent-harness.ts';
import {
  type EverythingHttp,
  freePort,
  httpConnection,
  type ProxyAnswer,
  passThrough,
  startEverythingHttp,
  testProxy,
  until,
} from './mcp-harness.ts';

const INFLATED = 64 * 1024 * 1024;
let web: EverythingHttp | undefined;
after(() => web?.stop());

interface Padding {
  sent: number;
  closedEarly: boolean;
}

/**
 * A POST answer holding `Echo: <marker>` goes out up to the echoed text, then `pad` writes
 * padding into it (counted in `stats`), then the rest; other answers pass as they are.
 */
function padded(marker: string, stats: Padding, pad: (res: ServerResponse) => Promise<void>): ProxyAnswer {
  return (req, up, res) => {
    if (req.method !== 'POST') return passThrough(req, up, res);
    const parts: Buffer[] = [];
    up.on('data', (d: Buffer) => parts.push(d));
    up.on('end', async () => {
      const body = Buffer.concat(parts).toString();
      const at = body.indexOf(`Echo: ${marker}`);
      const { 'content-length': _drop, ...headers } = up.headers;
      res.writeHead(up.statusCode ?? 502, headers);
      if (at < 0) return res.end(body);
      res.on('close', () => (stats.closedEarly = !res.writableFinished));
      res.write(body.slice(0, at + 'Echo: '.length));
      await pad(res);
      res.end(body.slice(at + 'Echo: '.length));
    });
  };
}

/** `Echo: inflate` goes out 64 MiB long, as fast as the client reads. */
function inflating(stats: Padding): ProxyAnswer {
  return padded('inflate', stats, async (res) => {
    const chunk = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < INFLATED / chunk.length && !res.destroyed; i++) {
      stats.sent += chunk.length;
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r).once('close', r));
    }
  });
}

/** `Echo: drip` goes out 1 KiB every 20 ms, until the client leaves. */
function dripping(stats: Padding): ProxyAnswer {
  return padded('drip', stats, async (res) => {
    while (!res.destroyed) {
      stats.sent += 1024;
      res.write('x'.repeat(1024));
      await new Promise((r) => setTimeout(r, 20));
    }
  });
}

test('an answer far over the cap is given up while it downloads; the next call works', async (t) => {
  web = await startEverythingHttp(await freePort());
  const stats: Padding = { sent: 0, closedEarly: false };
  const { logger } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: inflating(stats) }), logger);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  // The SDK may then fetch the answer again from the server's event store (the original, short).
  const got = await conn.call('echo', { message: 'inflate' }).then(
    (r) => JSON.stringify(r.content),
    (err: Error) => err.message,
  );
  assert.ok(got.length < 1024 * 1024, `the inflated answer was taken whole: ${got.length} chars`);
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(stats.closedEarly, 'the download was stopped');
  assert.ok(stats.sent < INFLATED / 2, `${stats.sent} bytes sent before the download stopped`);
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const ok = await conn.call('echo', { message: 'hi' });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'Echo: hi' }]);
});

test('a cancelled call stops downloading its answer', async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const stats: Padding = { sent: 0, closedEarly: false };
  const { logger } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: dripping(stats) }), logger);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const cancel = new AbortController();
  const call = conn.call('echo', { message: 'drip' }, cancel.signal).catch((err: Error) => err.message);
  await until(() => stats.sent > 10 * 1024, 10_000, 'the answer is downloading');
  cancel.abort(new Error('goal cancelled'));
  assert.match(String(await call), /cancelled/);
  await until(() => stats.closedEarly, 5000, 'the download was stopped');
  const sent = stats.sent;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(stats.sent, sent, 'nothing more was sent');
  const ok = await conn.call('echo', { message: 'hi' });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'Echo: hi' }]);
});

test('an endless event on the notification stream (GET) is given up at the cap; calls go on', async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const stats: Padding = { sent: 0, closedEarly: false };
  let floods = 0;
  // The first GET stream gets one line that never ends (800 MB grew the worker's heap with it).
  const flooding: ProxyAnswer = (req, up, res) => {
    if (req.method !== 'GET' || floods++ > 0) return passThrough(req, up, res);
    up.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.on('close', () => (stats.closedEarly = !res.writableFinished));
    void (async () => {
      res.write('data: ');
      const chunk = 'x'.repeat(1024 * 1024);
      for (let i = 0; i < INFLATED / chunk.length && !res.destroyed; i++) {
        stats.sent += chunk.length;
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r).once('close', r));
      }
      res.end();
    })();
  };
  const { logger } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: flooding }), logger);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  await until(() => stats.closedEarly, 15_000, 'the notification stream given up');
  assert.ok(stats.sent < INFLATED / 2, `${stats.sent} bytes sent before the stream was given up`);
  const ok = await conn.call('echo', { message: 'hi' });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'Echo: hi' }]);
});
