// A server listing one tool the SDK's schema refuses (an input schema that is not an object)
// keeps its other tools: the bad one is left out with a warning naming it, where the whole
// server was refused before (every job of a role using any of its tools failed). The real
// @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that adds the bad tool
// to its tools/list answer.

import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { McpConnection } from '../../shared/agent/mcp/index.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { type EverythingHttp, freePort, startEverythingHttp } from './mcp-harness.ts';

let web: EverythingHttp | undefined;
after(() => web?.stop());

const BAD_TOOL = '{"name":"odd","inputSchema":{"type":"string"}},';

/** Forwards everything; a tools/list answer gets BAD_TOOL first in its list. */
async function badToolProxy(target: number): Promise<number> {
  const srv = createServer((req, res) => {
    const up = request(
      { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers },
      (r) => {
        const { 'content-length': _drop, ...headers } = r.headers;
        res.writeHead(r.statusCode ?? 502, headers);
        if (req.method !== 'POST') return r.pipe(res);
        const parts: Buffer[] = [];
        r.on('data', (d: Buffer) => parts.push(d));
        r.on('end', () => res.end(Buffer.concat(parts).toString().replace('"tools":[', `"tools":[${BAD_TOOL}`)));
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  srv.unref();
  return (srv.address() as AddressInfo).port;
}

test('a tool the SDK refuses is left out, named in a warning; the server and its other tools work', async (t) => {
  web = await startEverythingHttp(await freePort());
  const url = new URL(`http://127.0.0.1:${await badToolProxy(web.port)}/mcp`);
  const { logger, lines } = captureLogger('debug');
  const conn = new McpConnection(
    { type: 'http', name: 'web', url, headers: {}, timeoutMs: 10_000 },
    { log: logger, scrub: (s) => s, backoff: { baseMs: 200, maxMs: 200 } },
  );
  conn.start();
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const names = (conn.tools ?? []).map((x) => x.name);
  assert.ok(names.includes('echo') && !names.includes('odd'), names.join(', '));
  const warned = lines.filter((l) => /lists an invalid tool/.test(String(l.msg)));
  assert.equal(warned.length, 1);
  assert.equal(warned[0]!.tool, 'odd');
  assert.match(String(warned[0]!.problem), /inputSchema\.type/);
  const ok = await conn.call('echo', { message: 'hi' });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'Echo: hi' }]);
});
