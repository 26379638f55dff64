// One MCP connection's liveness (shared/agent/mcp/connection.ts) against real stdio servers: the
// keep-alive ping must not take a server busy in a call for a dead one, must still catch an idle
// server that stops answering, and a server whose start fails must not be left running. Fast
// ping settings keep each case to a few seconds. Linux only (/proc, SIGSTOP).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { McpConnection } from '../../shared/agent/mcp/index.ts';
import type { ResolvedServer } from '../../shared/agent/mcp/resolve.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { until } from './mcp-harness.ts';

const require = createRequire(import.meta.url);
const sdk = (p: string) => pathToFileURL(require.resolve(`@modelcontextprotocol/sdk/${p}`)).href;
const BLOCK_MS = 1500;
const linuxOnly = { skip: process.platform !== 'linux' && 'reads /proc' };

/** A real MCP server (the SDK's McpServer over stdio) with a tool that blocks its event loop. */
function blockingServer(): string {
  const src = `
import { McpServer } from ${JSON.stringify(sdk('server/mcp.js'))};
import { StdioServerTransport } from ${JSON.stringify(sdk('server/stdio.js'))};
const server = new McpServer({ name: 'busy', version: '1.0.0' });
const text = (t) => ({ content: [{ type: 'text', text: t }] });
server.registerTool('block', { description: 'computes ${BLOCK_MS} ms' }, async () => {
  const until = Date.now() + ${BLOCK_MS};
  while (Date.now() < until) {}
  return text('blocked');
});
server.registerTool('hello', { description: 'answers at once' }, async () => text('hello!'));
await server.connect(new StdioServerTransport());
`;
  const file = join(tempDir('deepq-mcp-busy-'), 'server.mjs');
  writeFileSync(file, src);
  return file;
}

function stdioServer(command: string, args: string[], timeoutMs: number): ResolvedServer {
  return { type: 'stdio', name: 'srv', command, args, env: {}, timeoutMs };
}

function connect(server: ResolvedServer, backoffMs: number) {
  const { logger, raw } = captureLogger('debug');
  const conn = new McpConnection(server, {
    log: logger,
    scrub: (s) => s,
    backoff: { baseMs: backoffMs, maxMs: backoffMs },
    pingIntervalMs: 50,
    pingTimeoutMs: 300,
  });
  conn.start();
  return { conn, raw };
}

const firstText = (r: { content: unknown }) => (r.content as { text?: string }[])[0]?.text;
const readProc = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};
/** Live (not zombie) processes whose command line is exactly `argv`. */
function running(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d) && readProc(`/proc/${d}/cmdline`) === want)
    .filter((d) => !/^\S+ \(.*\) Z /.test(readProc(`/proc/${d}/stat`)))
    .map(Number);
}
const alive = (pid: number) => readProc(`/proc/${pid}/stat`) !== '' && !/\) Z /.test(readProc(`/proc/${pid}/stat`));
const kill = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
};

test(
  'a call blocking its server past the ping timeout is waited for, and so is a call alongside',
  linuxOnly,
  async (t) => {
    const { conn, raw } = connect(stdioServer(process.execPath, [blockingServer()], 10_000), 50);
    t.after(() => conn.close());
    await conn.waitFor(() => conn.state === 'up', Date.now() + 10_000);
    const pid = conn.pid;
    await new Promise((r) => setTimeout(r, 200)); // a few pings answered while idle
    const started = Date.now();
    const [blocked, other] = await Promise.all([conn.call('block', {}), conn.call('hello', {})]);
    assert.equal(firstText(blocked), 'blocked');
    assert.equal(firstText(other), 'hello!');
    assert.ok(Date.now() - started >= BLOCK_MS, 'the server was busy past the 300 ms ping timeout');
    assert.doesNotMatch(raw(), /connection lost/);
    assert.equal(conn.state, 'up');
    assert.equal(conn.pid, pid, 'the same server process');
  },
);

test('an idle server that stops answering pings is reconnected', linuxOnly, async (t) => {
  const { conn, raw } = connect(stdioServer(process.execPath, [blockingServer()], 10_000), 50);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 10_000);
  const stopped = conn.pid!;
  t.after(() => kill(stopped, 'SIGKILL'));
  kill(stopped, 'SIGSTOP');
  await until(() => /connection lost: ping failed/.test(raw()), 5000, 'the lost connection logged');
  await conn.waitFor(() => conn.state === 'up' && conn.pid !== stopped, Date.now() + 10_000);
  assert.equal(firstText(await conn.call('hello', {})), 'hello!');
});

test(
  'a server that never answers, behind sh -c, is stopped after each failed attempt and on close',
  linuxOnly,
  async (t) => {
    // The wrapper waits for its child (no exec: a command follows), as npx does: the child is the server.
    const sleep = ['sleep', `3599.${Math.floor(Math.random() * 1e6)}`];
    t.after(() => {
      for (const p of running(sleep)) kill(p, 'SIGKILL');
    });
    const { conn } = connect(stdioServer('sh', ['-c', `${sleep.join(' ')}; true`], 1000), 300);
    t.after(() => conn.close());
    const first = await until(() => running(sleep)[0], 5000, 'the first attempt running');
    await conn.waitFor(() => conn.state === 'down', Date.now() + 5000);
    assert.match(conn.lastError ?? '', /cannot start/);
    // The SDK ends the wrapper 2 s after a failed initialize; its child would be left orphaned.
    await until(() => !alive(first), 5000, 'the failed attempt stopped');
    const second = await until(() => running(sleep)[0], 5000, 'the next attempt running');
    assert.equal(conn.state, 'connecting');
    await conn.close();
    await until(() => !alive(second), 5000, 'the attempt in progress stopped on close');
  },
);

test('a server that ignores EOF and SIGTERM is stopped within the close, behind sh -c too', linuxOnly, async () => {
  // The SDK's own close takes 4 s on such a server; a worker's stop gives the close 5 s and exits.
  const file = blockingServer();
  writeFileSync(
    file,
    `${readFileSync(file, 'utf8')}\nprocess.on('SIGTERM', () => {});\nsetInterval(() => {}, 1000);\n`,
  );
  const argv = [process.execPath, file];
  const script = `exec 3<&0; "${process.execPath}" "${file}" <&3 & wait`;
  for (const server of [stdioServer(process.execPath, [file], 10_000), stdioServer('sh', ['-c', script], 10_000)]) {
    const { conn } = connect(server, 50);
    await conn.waitFor(() => conn.state === 'up', Date.now() + 10_000);
    assert.equal(firstText(await conn.call('hello', {})), 'hello!');
    const [pid] = running(argv);
    assert.ok(pid, 'the server runs');
    const started = Date.now();
    await conn.close();
    assert.ok(Date.now() - started < 4000, `the close took ${Date.now() - started} ms`);
    await until(() => !alive(pid), 1000, `server ${pid} stopped`);
  }
});
