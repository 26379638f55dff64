// A server listing one tool the SDK's schema refuses (an input schema that is not an object)
// keeps its other tools: the bad one is left out with a warning naming it, where the whole
// server was refused before (every job of a role using any of its tools failed). The real
// @modelcontextprotocol/server-everything (streamableHttp) behind a proxy that adds the bad tool
// to its tools/list answer.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { MAX_TOOL_DESCRIPTION_CHARS } from '../../shared/agent/mcp/connection.ts';
import { MAX_TOOLS_PER_SERVER, McpManager, resolveRoleServers } from '../../shared/agent/mcp/manager.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import {
  type EverythingHttp,
  freePort,
  httpConnection,
  type ProxyAnswer,
  passThrough,
  startEverythingHttp,
  testProxy,
} from './mcp-harness.ts';

let web: EverythingHttp | undefined;
after(() => web?.stop());

const BAD_TOOL = '{"name":"odd","inputSchema":{"type":"string"}},';

/** A tools/list answer (any answer to a POST) with `tool` (JSON and a comma) first in its list. */
const withToolFirst =
  (tool: string): ProxyAnswer =>
  (req, up, res) => {
    if (req.method !== 'POST') return passThrough(req, up, res);
    const { 'content-length': _drop, ...headers } = up.headers;
    res.writeHead(up.statusCode ?? 502, headers);
    const parts: Buffer[] = [];
    up.on('data', (d: Buffer) => parts.push(d));
    up.on('end', () => res.end(Buffer.concat(parts).toString().replace('"tools":[', `"tools":[${tool}`)));
  };

test('a tool the SDK refuses is left out, named in a warning; the server and its other tools work', async (t) => {
  web = await startEverythingHttp(await freePort());
  const { logger, lines } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: withToolFirst(BAD_TOOL) }), logger);
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

test('a tool whose input schema is too deep or too big is left out: it would break every call', async (t) => {
  web ??= await startEverythingHttp(await freePort());
  // 50,000 levels overflowed the stack of every model request of the role; 2.9 MB overran any context.
  const deep = `{"type":"object","properties":{"a":${'{"items":'.repeat(50_000)}{}${'}'.repeat(50_000)}}}`;
  const big = `{"type":"object","properties":{"a":{"type":"string","description":"${'x'.repeat(200_000)}"}}}`;
  const tools = `{"name":"deep","inputSchema":${deep}},{"name":"big","inputSchema":${big}},`;
  const { logger, lines } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: withToolFirst(tools) }), logger);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const names = (conn.tools ?? []).map((x) => x.name);
  assert.ok(names.includes('echo') && !names.includes('deep') && !names.includes('big'), names.join(', '));
  const warned = lines.filter((l) => /lists an invalid tool/.test(String(l.msg)));
  assert.deepEqual(
    warned.map((l) => [l.tool, l.problem]),
    [
      ['deep', 'its input schema nests deeper than 64 levels'],
      ['big', `its input schema is ${JSON.stringify(JSON.parse(big)).length} characters of JSON (at most 65536)`],
    ],
  );
  // What goes to the model for the server's tools still serialises.
  assert.ok(JSON.stringify(conn.tools).length < 1_000_000);
});

/** A tool whose input schema has alternatives at its top: one of two fields is required. */
const ALTERNATIVES = '{"anyOf":[{"required":["id"]},{"required":["email"]}]}';
const UNION_TOOL =
  '{"name":"lookup","description":"Finds a record.","inputSchema":{"type":"object",' +
  `"properties":{"id":{"type":"string"},"email":{"type":"string"}},${ALTERNATIVES.slice(1, -1)}}},`;

test('top-level anyOf, which model APIs refuse in a tool schema, moves into the description', async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const { logger, lines } = captureLogger('debug');
  const conn = httpConnection(await testProxy(web.port, { answer: withToolFirst(UNION_TOOL) }), logger);
  t.after(() => conn.close());
  await conn.waitFor(() => conn.state === 'up', Date.now() + 15_000);
  const lookup = conn.tools?.find((x) => x.name === 'lookup');
  assert.ok(lookup, 'listed');
  assert.deepEqual(lookup.inputSchema, {
    type: 'object',
    properties: { id: { type: 'string' }, email: { type: 'string' } },
  });
  assert.equal(lookup.description, `Finds a record.\n\nThe input must also satisfy this JSON Schema: ${ALTERNATIVES}`);
  const warned = lines.filter((l) => /at its top level: moved into its description/.test(String(l.msg)));
  assert.deepEqual(
    warned.map((l) => [l.tool, l.moved]),
    [['lookup', ['anyOf']]],
  );
  // The server's own tools are as they were.
  assert.equal(conn.tools?.find((x) => x.name === 'echo')?.inputSchema.anyOf, undefined);
});

/** 200 tools before the server's own, the first with a 10,000-character description. */
const MANY_TOOLS = `${Array.from({ length: 200 }, (_, i) =>
  JSON.stringify({ name: `t${i}`, description: i === 0 ? 'x'.repeat(10_000) : 'd', inputSchema: { type: 'object' } }),
).join(',')},`;

test("hundreds of tools: '*' offers a server's first 128, named ones anyway; long descriptions are cut", async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const { logger, lines } = captureLogger('debug');
  const port = await testProxy(web.port, { answer: withToolFirst(MANY_TOOLS) });
  const servers = {
    web: { type: 'http' as const, url: `http://127.0.0.1:${port}/mcp`, headers: {}, timeoutMs: 10_000 },
  };
  const start = async (tools: string[]) => {
    const mcp = new McpManager(resolveRoleServers({ tools }, servers, {}), { log: logger, secrets: [] });
    t.after(() => mcp.close());
    mcp.start();
    await mcp.awaitTools();
    return mcp.tools();
  };
  const all = (await start(['mcp:web/*'])).map((x) => x.def);
  assert.equal(all.length, MAX_TOOLS_PER_SERVER);
  assert.ok(!all.some((d) => d.name === 'mcp__web__echo'), 'a tool past the first 128');
  assert.equal(all[0]!.description.length, MAX_TOOL_DESCRIPTION_CHARS);
  assert.match(all[0]!.description, /^x+…$/);
  assert.equal(lines.filter((l) => /lists \d+ tools: its first 128 are offered/.test(String(l.msg))).length, 1);
  assert.ok(lines.some((l) => /description cut to 4000 characters/.test(String(l.msg)) && l.tool === 't0'));
  const named = (await start(['mcp:web/echo', 'mcp:web/t150'])).map((x) => x.def);
  assert.deepEqual(
    named.map((d) => d.name),
    ['mcp__web__echo', 'mcp__web__t150'],
  );
  // '*' with named ones past the first 128: both, each named one counted under its own name.
  const both = await start(['mcp:web/*', 'mcp:web/t150', 'mcp:web/echo']);
  assert.equal(both.length, MAX_TOOLS_PER_SERVER + 2);
  assert.deepEqual(
    both.slice(-2).map((x) => [x.def.name, x.label]),
    [
      ['mcp__web__t150', 'mcp:web/t150'],
      ['mcp__web__echo', 'mcp:web/echo'],
    ],
  );
});

test("a tool name fit for no label (long, spaces) counts under the server's '*'; echo under its own", async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const odd = `a tool named ${'x'.repeat(200)}`;
  const port = await testProxy(web.port, {
    answer: withToolFirst(`${JSON.stringify({ name: odd, inputSchema: { type: 'object' } })},`),
  });
  const servers = {
    web: { type: 'http' as const, url: `http://127.0.0.1:${port}/mcp`, headers: {}, timeoutMs: 10_000 },
  };
  const mcp = new McpManager(resolveRoleServers({ tools: ['mcp:web/*'] }, servers, {}), {
    log: captureLogger('warn').logger,
    secrets: [],
  });
  t.after(() => mcp.close());
  mcp.start();
  await mcp.awaitTools();
  const tools = mcp.tools();
  assert.equal(tools[0]!.label, 'mcp:web/*');
  // An approval entry naming it still matches it: the gate reads its own name, not the label.
  assert.equal(tools[0]!.approvalName, `mcp:web/${odd}`);
  assert.match(tools[0]!.def.name, /^mcp__web__a_tool_named_x+_[0-9a-f]{8}$/);
  assert.equal(tools.find((x) => x.def.name === 'mcp__web__echo')?.label, 'mcp:web/echo');
});

test("at most once: tools marked neither read-only nor idempotent, less the config's idempotentTools", async (t) => {
  web ??= await startEverythingHttp(await freePort());
  const { logger, lines } = captureLogger('debug');
  const url = `http://127.0.0.1:${web.port}/mcp`;
  const onceOf = async (idempotentTools?: '*' | string[]) => {
    const servers = { web: { type: 'http' as const, url, headers: {}, timeoutMs: 10_000, idempotentTools } };
    const mcp = new McpManager(resolveRoleServers({ tools: ['mcp:web/*'] }, servers, {}), { log: logger, secrets: [] });
    t.after(() => mcp.close());
    mcp.start();
    await mcp.awaitTools();
    return new Map(mcp.tools().map((x) => [x.label, x.atMostOnce]));
  };
  const byAnnotations = await onceOf();
  // echo: readOnlyHint; gzip-file-as-resource: idempotentHint alone; the toggle: neither.
  assert.equal(byAnnotations.get('mcp:web/echo'), false);
  assert.equal(byAnnotations.get('mcp:web/gzip-file-as-resource'), false);
  assert.equal(byAnnotations.get('mcp:web/toggle-simulated-logging'), true);
  const listed = await onceOf(['toggle-simulated-logging', 'no-such-tool']);
  assert.equal(listed.get('mcp:web/toggle-simulated-logging'), false);
  assert.equal(listed.get('mcp:web/toggle-subscriber-updates'), true);
  const warned = lines.filter((l) =>
    /does not offer the tool\(s\) of mcpServers\.web\.idempotentTools/.test(String(l.msg)),
  );
  assert.equal(warned.length, 1);
  assert.deepEqual(warned[0]!.missing, ['no-such-tool']);
  const all = await onceOf('*');
  assert.ok([...all.values()].every((once) => once === false));
});
