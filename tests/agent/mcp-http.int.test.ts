// MCP tools over streamable HTTP, end to end: a real worker process reaches
// @modelcontextprotocol/server-everything (`streamableHttp`) with a header whose value comes
// from the environment (sent, never logged nor stored), images come back summarised, a server
// restarted mid-goal is reconnected (a new session), and a server missing at start is named
// in the log and in /readyz (503) until it comes up; a job meanwhile fails with the reason.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, type ServiceProc, startFleet, startProcess } from '../../testing/fleet.ts';
import {
  type MessagesApiServer,
  type RecordedRequest,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import {
  type EverythingHttp,
  freePort,
  goalFor,
  headerRecorder,
  logLines,
  readyz,
  scriptedModel,
  startEverythingHttp,
  until,
  writeConfig,
} from './mcp-harness.ts';

const TOKEN = 'http-mcp-token-8c41d07b3e';
const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
let web: EverythingHttp;
let recorder: Awaited<ReturnType<typeof headerRecorder>>;
let absentPort: number;
const servers: EverythingHttp[] = [];

const scripts = {
  'echo-http': ({ turn, results }: { turn: number; results: WireToolResult[] }) =>
    turn === 0
      ? {
          content: [
            { type: 'tool_use' as const, id: 'toolu_http_1', name: 'mcp__web__echo', input: { message: 'over http' } },
            { type: 'tool_use' as const, id: 'toolu_http_2', name: 'mcp__web__get-tiny-image', input: {} },
          ],
          stop_reason: 'tool_use',
        }
      : text(results.map((r) => r.content).join('\n')),
  restart: async ({ turn, results }: { turn: number; results: WireToolResult[] }) => {
    if (turn === 0) return toolUse('mcp__web__echo', { message: 'before' });
    if (turn === 1) {
      // A new server process on the same port: the old session is gone with the old process.
      await web.stop();
      web = await startEverythingHttp(web.port);
      servers.push(web);
      return toolUse('mcp__web__echo', { message: 'after' });
    }
    if (results[0]?.is_error && turn < 4) return toolUse('mcp__web__echo', { message: 'after' });
    return text(`answer: ${results[0]?.content}`);
  },
  'absent-echo': ({ turn, results }: { turn: number; results: WireToolResult[] }) =>
    turn === 0 ? toolUse('mcp__absent__echo', { message: 'finally' }) : text(`answer: ${results[0]?.content}`),
};

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler: scriptedModel(scripts) });
  web = await startEverythingHttp(await freePort());
  servers.push(web);
  recorder = await headerRecorder(web.port);
  absentPort = await freePort();
  const configFile = writeConfig(
    {
      web: {
        type: 'http',
        url: `http://127.0.0.1:${recorder.port}/mcp`,
        headers: { Authorization: { env: 'MCP_TEST_TOKEN' }, 'X-Static': 'plain-value' },
      },
      absent: { type: 'http', url: `http://127.0.0.1:${absentPort}/mcp`, timeoutMs: 1000 },
    },
    [
      { name: 'mcp-web', tools: ['mcp:web/echo', 'mcp:web/get-tiny-image'] },
      { name: 'mcp-absent', tools: ['mcp:absent/echo'] },
    ],
  );
  const env = anthropicEnv(server, {
    DEEPQ_CONFIG: configFile,
    MCP_TEST_TOKEN: `Bearer ${TOKEN}`,
    LOG_LEVEL: 'debug',
    DEEPQ_SUBTASK_ATTEMPTS: '1',
  });
  fleet = await startFleet(redis.url, env, { roles: ['mcp-web'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
  await Promise.all(servers.map((s) => s.stop()));
});

function scenarioRequests(scenario: string): RecordedRequest[] {
  return server.requests.filter(
    (r) =>
      systemText(r.body ?? {}).startsWith('You are the MCP test agent') && r.rawBody.includes(`scenario=${scenario}`),
  );
}

async function runGoal(role: string, scenario: string) {
  const goalId = await fleet.client.enqueue({ goal: goalFor(role, scenario) });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  return { goalId, g };
}

test('a tool_use reaches the MCP server over streamable HTTP; the header secret is sent but never kept', async () => {
  const { goalId, g } = await runGoal('mcp-web', 'echo-http');
  assert.equal(g.status, 'done');
  const [first, second] = scenarioRequests('echo-http');
  assert.deepEqual(
    first!.body.tools!.map((t) => t.name),
    ['mcp__web__echo', 'mcp__web__get-tiny-image'],
  );
  const [echo, image] = second!.body.messages.at(-1)!.content as WireToolResult[];
  assert.equal(echo!.tool_use_id, 'toolu_http_1');
  assert.equal(echo!.content, 'Echo: over http');
  assert.equal(image!.tool_use_id, 'toolu_http_2');
  // An image is summarised: its type and size, never its bytes.
  assert.match(String(image!.content), /^Here's the image you requested:\n\[image image\/png, \d{3,} bytes\]\n/);
  assert.ok(String(image!.content).length < 300);
  assert.match(String(await fleet.client.read(goalId, 'echo-http.md')), /^Echo: over http\n/);

  // The headers reached the server, the env-sourced value resolved at start.
  assert.ok(recorder.seen.length > 0);
  for (const h of recorder.seen) {
    assert.equal(h.authorization, `Bearer ${TOKEN}`);
    assert.equal(h['x-static'], 'plain-value');
  }
  // ... and never reach logs (at debug level), model requests or stored transcripts.
  for (const p of fleet.procs) assert.ok(!p.output().includes(TOKEN), `${p.name}'s logs hold the token`);
  for (const r of server.requests) assert.ok(!r.rawBody.includes(TOKEN), `request #${r.index} holds the token`);
  for (const k of await redis.client.keys(`${fleet.cfg.prefix}:goal:${goalId}:thread:*`)) {
    assert.ok(!String(await redis.client.get(k)).includes(TOKEN), `${k} holds the token`);
  }
});

test('an HTTP server restarted mid-goal is reconnected with a new session and the goal finishes', async () => {
  const { goalId, g } = await runGoal('mcp-web', 'restart');
  assert.equal(g.status, 'done');
  assert.equal(await fleet.client.read(goalId, 'restart.md'), 'answer: Echo: after');
  const w = fleet.procs.find((p) => p.name === 'worker-mcp-web')!;
  const connects = () => logLines(w.output()).filter((l) => l.mcpServer === 'web' && /connected/.test(String(l.msg)));
  await until(() => connects().length >= 2, 10_000);
  assert.ok(logLines(w.output()).some((l) => l.mcpServer === 'web' && /connection lost/.test(String(l.msg))));
});

test('a server missing at start: logged, /readyz 503 naming it, a failed subtask; then it connects', async () => {
  const worker: ServiceProc = startProcess('worker-mcp-absent', ['worker', '--role', 'mcp-absent'], fleet.env);
  const notReady = await until(async () => {
    try {
      const r = await readyz(worker.port);
      return r.body.checks['mcp:absent'] === false && r.body.checks.worker ? r : undefined;
    } catch {
      return undefined; // not listening yet
    }
  });
  assert.equal(notReady.status, 503);
  assert.deepEqual(notReady.body, { ok: false, checks: { redis: true, worker: true, 'mcp:absent': false } });
  await until(() => /MCP server \\"absent\\" cannot start: /.test(worker.output()));
  const line = logLines(worker.output()).find((l) => /MCP server "absent" cannot start/.test(String(l.msg)))!;
  assert.equal(line.level, 50, 'logged as an error');
  assert.match(String(line.reason), /fetch failed|ECONNREFUSED/);

  // A job for the role fails (attempts: 1) with the reason; with nothing made, the reflection's
  // end goes to a human.
  const { goalId, g } = await runGoal('mcp-absent', 'absent-echo');
  assert.equal(g.status, 'awaiting_human');
  assert.match(String(g.reason), /^no subtask finished and no artifact is done: a human must decide/);
  const failed = (await fleet.client.goals.events(goalId)).map((e) => e.event).find((e) => e.type === 'subtask_failed');
  assert.ok(failed && 'reason' in failed, 'the subtask failed');
  assert.match(String(failed.reason), /MCP server "absent" is unavailable: cannot start: /);

  // The server comes up: the worker connects on its next retry and becomes ready.
  servers.push(await startEverythingHttp(absentPort));
  const ready = await until(async () => {
    const r = await readyz(worker.port);
    return r.status === 200 ? r : undefined;
  }, 45_000);
  assert.deepEqual(ready.body.checks, { redis: true, worker: true, 'mcp:absent': true });
  const done = await runGoal('mcp-absent', 'absent-echo');
  assert.equal(done.g.status, 'done');
  assert.equal(await fleet.client.read(done.goalId, 'absent-echo.md'), 'answer: Echo: finally');
});
