// The MCP client manager in process (shared/agent/mcp/), against real MCP servers over stdio:
// a small server built with the official SDK (odd tool names, every content type, a tool that
// adds a tool: tools/list_changed) and server-everything. Plus the pure parts: names,
// content summaries, role selections, env resolution. No Redis needed.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  API_TOOL_NAME_RE,
  assignToolNames,
  blockToText,
  McpManager,
  mcpSelection,
  namespacedToolName,
  resolveRoleServers,
  resolveServer,
  secretForms,
  toolResultOrThrow,
} from '../../shared/agent/mcp/index.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { EVERYTHING_ENTRY, until } from './mcp-harness.ts';

const require = createRequire(import.meta.url);
const sdk = (p: string) => pathToFileURL(require.resolve(`@modelcontextprotocol/sdk/${p}`)).href;
const LONG = `very_long_tool_${'y'.repeat(90)}`;

/** A real MCP server (the SDK's McpServer over stdio) with the shapes deepq must handle. */
function fixtureServer(): string {
  const src = `
import { McpServer } from ${JSON.stringify(sdk('server/mcp.js'))};
import { StdioServerTransport } from ${JSON.stringify(sdk('server/stdio.js'))};
const server = new McpServer({ name: 'fixture', version: '1.0.0' });
const text = (t) => ({ content: [{ type: 'text', text: t }] });
server.registerTool('alpha', { description: 'the first tool' }, async () => text('alpha!'));
server.registerTool('odd.name with spaces', { description: 'odd' }, async () => text('odd!'));
server.registerTool(${JSON.stringify(LONG)}, { description: 'long' }, async () => text('long!'));
server.registerTool('mixed', { description: 'every content type' }, async () => ({
  content: [
    { type: 'text', text: 'mixed:' },
    { type: 'audio', data: Buffer.alloc(300).toString('base64'), mimeType: 'audio/wav' },
    { type: 'resource', resource: { uri: 'file:///a.bin', mimeType: 'application/octet-stream',
      blob: Buffer.alloc(1234).toString('base64') } },
    { type: 'resource_link', uri: 'file:///b.txt', name: 'b.txt', mimeType: 'text/plain' },
  ],
}));
server.registerTool('fail', { description: 'always an error' }, async () => ({
  content: [{ type: 'text', text: 'it went wrong: ' + process.env.FIXTURE_SECRET }], isError: true,
}));
server.registerTool('sleep', { description: 'waits 30 s unless cancelled' }, async (extra) => {
  await new Promise((resolve) => {
    const t = setTimeout(resolve, 30000);
    extra.signal.addEventListener('abort', () => {
      clearTimeout(t);
      console.error('sleep cancelled by the client');
      resolve();
    });
  });
  return text('slept');
});
server.registerTool('add-beta', { description: 'adds the beta tool' }, async () => {
  server.registerTool('beta', { description: 'the second tool' }, async () => text('beta!'));
  return text('added');
});
await server.connect(new StdioServerTransport());
`;
  const file = join(tempDir('deepq-mcp-fixture-'), 'server.mjs');
  writeFileSync(file, src);
  return file;
}

test('namespaced names fit the Messages API and never collide', () => {
  assert.equal(namespacedToolName('everything', 'echo'), 'mcp__everything__echo');
  assert.equal(namespacedToolName('a', 'get-env'), 'mcp__a__get-env');
  const odd = namespacedToolName('srv', 'odd.name with spaces');
  assert.match(odd, /^mcp__srv__odd_name_with_spaces_[0-9a-f]{8}$/);
  assert.notEqual(odd, namespacedToolName('srv', 'odd_name_with_spaces'), 'cleaned names differ by their hash');
  const long = namespacedToolName('a-forty-one-char-server-name-0123456789ab', LONG);
  assert.equal(long.length, 64);
  assert.match(long, API_TOOL_NAME_RE);
  assert.equal(long, namespacedToolName('a-forty-one-char-server-name-0123456789ab', LONG), 'stable');
  // `a__b` + `c` and `a` + `b__c` would both be mcp__a__b__c: the second is hashed.
  const names = assignToolNames([
    { server: 'a__b', tool: 'c' },
    { server: 'a', tool: 'b__c' },
    { server: 'one', tool: 'search' },
    { server: 'two', tool: 'search' },
  ]);
  assert.equal(names[0], 'mcp__a__b__c');
  assert.match(names[1]!, /^mcp__a__b__c_[0-9a-f]{8}$/);
  assert.deepEqual(names.slice(2), ['mcp__one__search', 'mcp__two__search']);
  for (const n of names) assert.match(n, API_TOOL_NAME_RE);
});

test('content blocks become text: images, audio and resources as type and size; isError throws', () => {
  const png = Buffer.alloc(1234).toString('base64');
  assert.equal(blockToText({ type: 'image', data: png, mimeType: 'image/png' }), '[image image/png, 1234 bytes]');
  assert.equal(
    blockToText({ type: 'resource', resource: { uri: 'mem://x', mimeType: 'text/plain', text: 'héllo' } }),
    '[embedded resource mem://x text/plain, 6 bytes]',
  );
  assert.equal(toolResultOrThrow({ content: [], structuredContent: { n: 1 } }), '{"n":1}');
  assert.equal(
    toolResultOrThrow({
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    }),
    'a\nb',
  );
  assert.throws(
    () =>
      toolResultOrThrow({ content: [{ type: 'text', text: 'boom s3cr3t-value' }], isError: true }, (s) =>
        s.replace('s3cr3t-value', '***'),
      ),
    { message: 'boom ***' },
  );
  assert.throws(() => toolResultOrThrow({ content: [], isError: true }), /reported an error without a message/);
});

test('role selections and values from the environment', () => {
  const sel = mcpSelection(['read_file', 'mcp:a/*', 'mcp:b/x', 'mcp:b/y', 'mcp:b/x', 'mcp:a/z', 'mcp:c/q', 'mcp:c/*']);
  assert.deepEqual(
    [...sel],
    [
      ['a', { all: true, named: ['z'] }],
      ['b', { all: false, named: ['x', 'y'] }],
      ['c', { all: true, named: ['q'] }],
    ],
  );
  const http = { type: 'http' as const, url: 'http://h/mcp', headers: { Authorization: { env: 'TOK' } }, timeoutMs: 5 };
  assert.throws(() => resolveServer('web', http, {}), {
    message: /mcpServers\.web\.headers\.Authorization: environment variable TOK is not set/,
  });
  const r = resolveServer('web', http, { TOK: 'Bearer abc123xyz' });
  assert.equal(r.server.type === 'http' && r.server.headers.Authorization, 'Bearer abc123xyz');
  assert.deepEqual(r.secrets, ['Bearer abc123xyz', 'abc123xyz']);
  assert.deepEqual(secretForms('plain-token-value'), ['plain-token-value']);
  // Only the role's servers are resolved: another server's missing variable does not matter.
  const servers = { web: http, other: { ...http, headers: { X: { env: 'MISSING' } } } };
  assert.deepEqual(
    resolveRoleServers({ tools: ['mcp:web/echo'] }, servers, { TOK: 't0k3n-value' }).servers.map((s) => s.server.name),
    ['web'],
  );
});

test("the README's Tools and MCP config example loads, and its workers resolve their servers", () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Tools and MCP'));
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(yaml, 'the section has a yaml example');
  const file = join(tempDir('deepq-readme-'), 'deepq.yaml');
  writeFileSync(file, yaml);
  const cfg = loadConfig({ DEEPQ_CONFIG: file, HOME: tmpdir() });
  assert.deepEqual(Object.keys(cfg.mcpServers), ['everything', 'search']);
  assert.deepEqual(cfg.mcpServers.search!.idempotentTools, ['search']);
  assert.equal(cfg.mcpServers.everything!.idempotentTools, undefined);
  writeFileSync(file, yaml.replace('idempotentTools: [search]', 'idempotentTools: all'));
  assert.throws(() => loadConfig({ DEEPQ_CONFIG: file, HOME: tmpdir() }), {
    message: /mcpServers\.search\.idempotentTools: must be "\*" or a list of tool names/,
  });
  const research = cfg.roles.find((r) => r.name === 'research-specialist')!;
  const env = { EVERYTHING_TOKEN: 'tok-everything-1', SEARCH_MCP_AUTH: 'Bearer tok-search-2' };
  const resolved = resolveRoleServers(research, cfg.mcpServers, env);
  assert.deepEqual(
    resolved.servers.map((s) => [s.server.name, s.selection]),
    [
      ['search', { all: true, named: [] }],
      ['everything', { all: false, named: ['echo'] }],
    ],
  );
  assert.deepEqual(resolved.secrets, ['Bearer tok-search-2', 'tok-search-2', 'tok-everything-1']);
  assert.throws(() => resolveRoleServers(research, cfg.mcpServers, { EVERYTHING_TOKEN: 'x' }), {
    message: /mcpServers\.search\.headers\.Authorization: environment variable SEARCH_MCP_AUTH is not set/,
  });
  // A role without MCP tools needs none of the variables.
  const critic = cfg.roles.find((r) => r.name === 'critic')!;
  assert.deepEqual(resolveRoleServers(critic, cfg.mcpServers, {}).servers, []);
});

test('an MCP server config that could not work stops at start, naming the field and why', () => {
  const file = join(tempDir('deepq-mcp-cfg-'), 'deepq.json');
  const load = (mcpServers: Record<string, unknown>) => {
    writeFileSync(file, JSON.stringify({ mcpServers }));
    return () => loadConfig({ DEEPQ_CONFIG: file, HOME: tmpdir() });
  };
  const http = (extra: Record<string, unknown>) => ({ web: { type: 'http', url: 'http://h/mcp', ...extra } });
  for (const url of ['ftp://h/mcp', 'file:///etc/passwd', 'mailto:a@b.c'])
    assert.throws(load(http({ url })), { message: /mcpServers\.web\.url: must be an http:\/\/ or https:\/\/ URL/ });
  assert.throws(load(http({ headers: { 'Bad Header': 'x' } })), {
    message: /mcpServers\.web\.headers\.Bad Header: not a valid key: an HTTP header name/,
  });
  assert.throws(load(http({ headers: { 'X-Token': 'a\r\nX-Evil: 1' } })), {
    message: /mcpServers\.web\.headers\.X-Token: a header value holds no line break or NUL/,
  });
  assert.throws(load({ Web: { type: 'stdio', command: 'x' } }), {
    message: /mcpServers\.Web: not a valid key: server names: a-z, 0-9, _ and -/,
  });
  assert.throws(load({ s: { type: 'stdio', command: 'x', env: { 'A=B': 'x' } } }), {
    message: /mcpServers\.s\.env\.A=B: not a valid key: an environment variable name holds no = or NUL/,
  });
  const ok = load(http({ url: 'HTTPS://h/mcp', headers: { 'X-Api-Key': { env: 'K' } } }))();
  // A value from the environment is held to the same rule when the worker resolves it.
  assert.throws(() => resolveServer('web', ok.mcpServers.web!, { K: 'a\nb' }), {
    message: /mcpServers\.web\.headers\.X-Api-Key: environment variable K holds a line break or NUL/,
  });
});

test('the manager lists, names, calls and summarises tools, follows list_changed, and closes', async (t) => {
  const { logger, raw } = captureLogger('debug');
  const secret = 'fixture-secret-0b9f7d';
  const resolved = resolveRoleServers(
    { tools: ['mcp:fixture/*', 'mcp:everything/echo', 'mcp:everything/no-such-tool'] },
    {
      fixture: {
        type: 'stdio',
        command: process.execPath,
        args: [fixtureServer()],
        env: { FIXTURE_SECRET: { env: 'FIXTURE_SECRET' } },
        timeoutMs: 10_000,
      },
      everything: {
        type: 'stdio',
        command: process.execPath,
        args: [EVERYTHING_ENTRY, 'stdio'],
        env: {},
        timeoutMs: 10_000,
      },
    },
    { FIXTURE_SECRET: secret },
  );
  const secrets = [...resolved.secrets];
  const mcp = new McpManager(resolved, { log: logger, secrets });
  t.after(() => mcp.close());
  assert.deepEqual(mcp.checks(), { 'mcp:fixture': false, 'mcp:everything': false });
  mcp.start();
  await mcp.awaitTools();
  assert.deepEqual(mcp.checks(), { 'mcp:fixture': true, 'mcp:everything': true });

  const names = () => mcp.tools().map((x) => x.def.name);
  assert.deepEqual(names().slice(0, 2), ['mcp__fixture__alpha', namespacedToolName('fixture', 'odd.name with spaces')]);
  assert.ok(names().includes('mcp__everything__echo'));
  assert.ok(!names().some((n) => n.startsWith('mcp__everything__') && n !== 'mcp__everything__echo'));
  for (const n of names()) assert.match(n, API_TOOL_NAME_RE);
  assert.match(raw(), /does not offer the role's tool\(s\): no-such-tool/);

  const tool = (name: string) => mcp.tools().find((x) => x.def.name === name)!;
  assert.equal(await tool(namespacedToolName('fixture', 'odd.name with spaces')).run({}), 'odd!');
  assert.equal(await tool(namespacedToolName('fixture', LONG)).run({}), 'long!');
  assert.equal(tool('mcp__fixture__alpha').def.description, 'the first tool');
  assert.equal(
    await tool('mcp__fixture__mixed').run({}),
    'mixed:\n[audio audio/wav, 300 bytes]\n[embedded resource file:///a.bin application/octet-stream, 1234 bytes]\n' +
      '[resource link file:///b.txt text/plain (b.txt)]',
  );
  // An isError result is thrown (the agent loop sends it as is_error), the secret scrubbed.
  await assert.rejects(tool('mcp__fixture__fail').run({}), { message: 'it went wrong: ***' });
  await assert.rejects(tool('mcp__fixture__alpha').run('not an object'), /expected a JSON object/);
  assert.equal(await tool('mcp__everything__echo').run({ message: 'hi' }), 'Echo: hi');

  // An aborted call (the job's signal) is cancelled on the server too (notifications/cancelled).
  const ac = new AbortController();
  const sleeping = mcp.tools(undefined, ac.signal).find((x) => x.def.name === 'mcp__fixture__sleep')!;
  const call = sleeping.run({});
  setTimeout(() => ac.abort(new Error('goal cancelled')), 200);
  await assert.rejects(call, { message: 'MCP tool "sleep" of server "fixture": cancelled (goal cancelled)' });
  await until(() => raw().includes('sleep cancelled by the client'), 5000);

  // A tool added on the server (notifications/tools/list_changed) is listed again.
  assert.ok(!names().includes('mcp__fixture__beta'));
  assert.equal(await tool('mcp__fixture__add-beta').run({}), 'added');
  await until(() => names().includes('mcp__fixture__beta'), 10_000);
  assert.equal(await tool('mcp__fixture__beta').run({}), 'beta!');
  assert.ok(!raw().includes(secret), 'the secret reached the log');

  // Closing ends the stdio servers.
  const pids = ['fixture', 'everything'].map((s) => mcp.connection(s)!.pid!);
  await mcp.close();
  assert.deepEqual(mcp.checks(), { 'mcp:fixture': false, 'mcp:everything': false });
  await until(() =>
    pids.every((pid) => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }),
  );
  await assert.rejects(tool('mcp__fixture__alpha').run({}), /closed/);
});

/** Pids whose parent is `ppid` (Linux /proc). */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const stat = readProc(`/proc/${d}/stat`);
    if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid) out.push(Number(d));
  }
  return out;
}
const readProc = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};

test('a stdio server started through a wrapper (sh -c) is stopped with it, even one busy in a call', {
  skip: process.platform !== 'linux' && 'reads /proc',
}, async (t) => {
  const { logger } = captureLogger();
  const marker = `deepq-wrapper-${Math.random().toString(36).slice(2)}`;
  // The wrapper stays the SDK's child; the server is its child (no exec), as under npx.
  const command = `"${process.execPath}" "${EVERYTHING_ENTRY}" stdio # ${marker}`;
  const resolved = resolveRoleServers(
    { tools: ['mcp:wrapped/*'] },
    { wrapped: { type: 'stdio', command: 'sh', args: ['-c', command], env: {}, timeoutMs: 60_000 } },
    {},
  );
  const mcp = new McpManager(resolved, { log: logger, secrets: [] });
  t.after(() => mcp.close());
  mcp.start();
  await mcp.awaitTools();
  const sh = readdirSync('/proc').find((d) => /^\d+$/.test(d) && readProc(`/proc/${d}/cmdline`).includes(marker));
  assert.ok(sh, 'the wrapper runs');
  const [server] = childrenOf(Number(sh));
  assert.ok(server, 'the server runs under the wrapper');
  // Busy in a 30 s operation: its stdin closing alone does not end it before that.
  const long = mcp.tools().find((x) => x.def.name === 'mcp__wrapped__trigger-long-running-operation')!;
  long.run({ duration: 30, steps: 30 }).catch(() => {});
  await new Promise((r) => setTimeout(r, 300));
  await mcp.close();
  await until(() => !readProc(`/proc/${server}/stat`) || / Z /.test(readProc(`/proc/${server}/stat`)), 5000);
});

test('a process a stdio server left running on its own (setsid, its parent gone) is stopped with it', {
  skip: process.platform !== 'linux' && 'reads /proc',
}, async (t) => {
  const { logger } = captureLogger();
  const marker = `deepq-daemon-${Math.random().toString(36).slice(2)}`;
  // A subshell starts a new session in the background and exits: its child is init's, no descendant.
  const daemon = `(setsid sh -c 'sleep 300; : ${marker}' &)`;
  const command = `${daemon}; exec "${process.execPath}" "${EVERYTHING_ENTRY}" stdio`;
  const resolved = resolveRoleServers(
    { tools: ['mcp:daemon/*'] },
    { daemon: { type: 'stdio', command: 'sh', args: ['-c', command], env: {}, timeoutMs: 60_000 } },
    {},
  );
  const mcp = new McpManager(resolved, { log: logger, secrets: [] });
  t.after(() => mcp.close());
  mcp.start();
  await mcp.awaitTools();
  const alive = (pid: number) => readProc(`/proc/${pid}/stat`) !== '' && !/ Z /.test(readProc(`/proc/${pid}/stat`));
  const left = readdirSync('/proc').find((d) => /^\d+$/.test(d) && readProc(`/proc/${d}/cmdline`).includes(marker));
  assert.ok(left, 'the process the server left runs');
  const server = mcp.connection('daemon')!.pid!;
  const ppid = Number(/^PPid:\s+(\d+)$/m.exec(readProc(`/proc/${left}/status`))?.[1]);
  assert.notEqual(ppid, server, 'it is not the server process’s child');
  const [sleeper] = childrenOf(Number(left));
  assert.ok(sleeper, 'its sleep runs');
  await mcp.close();
  await until(() => !alive(Number(left)) && !alive(sleeper), 5000);
});
