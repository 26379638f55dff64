// MCP tools over stdio, end to end: a real worker process (`deepq worker --role R`) connects
// to @modelcontextprotocol/server-everything, offers its tools as `mcp__<server>__<tool>`, and
// the model's tool_use (the real Anthropic SDK against the local Messages-API server) reaches
// the server; its answer comes back in the next request's tool_result. Also: two servers with
// the same tool names, a secret env value that never leaves the worker, a server killed
// mid-goal, a call past its timeout, a goal cancelled mid-call, a missing env var at start.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, type ServiceProc, startFleet } from '../../testing/fleet.ts';
import {
  type MessageReply,
  type MessagesApiServer,
  type RecordedRequest,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
  type WireToolResult,
  type WireToolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { everythingStdio, goalFor, logLines, scriptedModel, until, writeConfig } from './mcp-harness.ts';

// A quote and a backslash: JSON (the server's env listing, a log line) writes it escaped.
const SECRET = 'mcp-test-"secret"\\5f1c2e9a77';
/** Its part no escaping changes: found anywhere, the secret leaked, however written. */
const SECRET_CORE = '5f1c2e9a77';
const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
let configFile: string;

const ECHO_TOOLS = ['echo', 'get-env', 'trigger-long-running-operation'];

function worker(name: string): ServiceProc {
  return fleet.procs.find((p) => p.name === name)!;
}

/** The latest process id the worker logged for a stdio server. */
function serverPid(name: string): number | undefined {
  const lines = logLines(worker('worker-mcp-echo').output());
  const connected = lines.filter((l) => l.mcpServer === name && typeof l.serverPid === 'number');
  return connected.at(-1)?.serverPid as number | undefined;
}

function uses(reply: MessageReply): WireToolUse[] {
  return reply.content.filter((b): b is WireToolUse => b.type === 'tool_use');
}

const scripts = {
  echo: ({ turn, results }: { turn: number; results: WireToolResult[] }) =>
    turn === 0
      ? toolUse('mcp__everything__echo', { message: 'hello over stdio' })
      : text(`answer: ${results[0]?.content}`),
  twins: ({ turn }: { turn: number }) =>
    turn === 0
      ? {
          content: [
            { type: 'tool_use' as const, id: 'toolu_twins_1', name: 'mcp__everything__get-env', input: {} },
            { type: 'tool_use' as const, id: 'toolu_twins_2', name: 'mcp__twin__get-env', input: {} },
          ],
          stop_reason: 'tool_use',
        }
      : text('compared the two environments'),
  kill: async ({ turn, results }: { turn: number; results: WireToolResult[] }) => {
    if (turn === 0) return toolUse('mcp__everything__echo', { message: 'before' });
    if (turn === 1) {
      // Kill the server between two calls; the worker notices, reconnects and lists again.
      const w = worker('worker-mcp-echo');
      const lost = (w.output().match(/connection lost/g) ?? []).length;
      process.kill(serverPid('everything')!, 'SIGKILL');
      await until(() => (w.output().match(/connection lost/g) ?? []).length > lost, 10_000);
      return toolUse('mcp__everything__echo', { message: 'after' });
    }
    // A call that raced the reconnection came back as an error: the model tries again.
    if (results[0]?.is_error && turn < 4) return toolUse('mcp__everything__echo', { message: 'after' });
    return text(`answer: ${results[0]?.content}`);
  },
  timeout: ({ turn, results }: { turn: number; results: WireToolResult[] }) =>
    turn === 0
      ? toolUse('mcp__slow__trigger-long-running-operation', { duration: 10, steps: 10 })
      : text(`result: ${results[0]?.is_error ? 'error' : 'ok'}: ${results[0]?.content}`),
  cancel: ({ turn }: { turn: number }) =>
    turn === 0
      ? toolUse('mcp__everything__trigger-long-running-operation', { duration: 30, steps: 30 })
      : text('should never get here'),
};

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler: scriptedModel(scripts) });
  configFile = writeConfig(
    {
      everything: everythingStdio({
        env: { SERVER_TAG: 'one', SECRET_TOKEN: { env: 'MCP_TEST_SECRET' } },
        timeoutMs: 20_000,
      }),
      twin: everythingStdio({ env: { SERVER_TAG: 'two' } }),
      slow: everythingStdio({ timeoutMs: 1000 }),
    },
    [
      { name: 'mcp-echo', tools: ['list_files', ...ECHO_TOOLS.map((t) => `mcp:everything/${t}`), 'mcp:twin/*'] },
      { name: 'mcp-slow', tools: ['mcp:slow/trigger-long-running-operation'] },
    ],
  );
  const env = anthropicEnv(server, { DEEPQ_CONFIG: configFile, MCP_TEST_SECRET: SECRET, LOG_LEVEL: 'debug' });
  fleet = await startFleet(redis.url, env, { roles: ['mcp-echo', 'mcp-slow'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

/** The subagent requests of a scenario, in order. */
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

test('a missing env var of an MCP server stops the worker at start, naming it (exit 78)', async () => {
  const env = { ...fleet.env };
  delete env.MCP_TEST_SECRET;
  const r = await runCli(['worker', '--role', 'mcp-echo'], env, 30_000);
  assert.equal(r.code, 78, r.stderr);
  assert.match(r.stderr, /mcpServers\.everything\.env\.SECRET_TOKEN: environment variable MCP_TEST_SECRET is not set/);
});

test('a tool_use reaches the MCP server through the worker and its answer comes back (stdio)', async () => {
  const { goalId, g } = await runGoal('mcp-echo', 'echo');
  assert.equal(g.status, 'done');
  assert.equal(await fleet.client.read(goalId, 'echo.md'), 'answer: Echo: hello over stdio');

  const reqs = scenarioRequests('echo');
  assert.equal(reqs.length, 2);
  // The tools offered: the role's choice of `everything`, every tool of `twin`, namespaced.
  const tools = reqs[0]!.body.tools!;
  const names = tools.map((t) => t.name);
  for (const t of ECHO_TOOLS) assert.ok(names.includes(`mcp__everything__${t}`), `${t} offered`);
  assert.ok(!names.includes('mcp__everything__get-tiny-image'), 'a tool the role did not ask for');
  for (const t of ['echo', 'get-env', 'get-tiny-image', 'get-sum']) assert.ok(names.includes(`mcp__twin__${t}`));
  for (const n of names) assert.match(n, /^[a-zA-Z0-9_-]{1,64}$/);
  const echo = tools.find((t) => t.name === 'mcp__everything__echo')!;
  assert.equal(echo.description, 'Echoes back the input string');
  assert.deepEqual((echo.input_schema as { required?: string[] }).required, ['message']);
  // The model's call, and the server's answer in the next request's tool_result.
  const call = uses(reqs[0]!.response!.body as MessageReply)[0]!;
  const result = (reqs[1]!.body.messages.at(-1)!.content as WireToolResult[])[0]!;
  assert.equal(result.tool_use_id, call.id);
  assert.equal(result.content, 'Echo: hello over stdio');
  assert.ok(!result.is_error);
});

test("two servers' same-named tools stay apart; a secret env value never leaves the worker", async () => {
  const { goalId, g } = await runGoal('mcp-echo', 'twins');
  assert.equal(g.status, 'done');
  const [, second] = scenarioRequests('twins');
  const results = second!.body.messages.at(-1)!.content as WireToolResult[];
  const [one, two] = results.map((r) => String(r.content));
  assert.match(one!, /"SERVER_TAG": "one"/);
  assert.match(two!, /"SERVER_TAG": "two"/);
  // The server got the secret (the key is there), the model only sees it scrubbed.
  assert.match(one!, /"SECRET_TOKEN": "\*\*\*"/);
  assert.doesNotMatch(two!, /SECRET_TOKEN/);
  // deepq's own secrets are not handed to MCP servers.
  for (const r of [one!, two!]) assert.doesNotMatch(r, /ANTHROPIC_API_KEY|REDIS_URL|sk-ant-/);

  for (const r of server.requests) assert.ok(!r.rawBody.includes(SECRET_CORE), `request #${r.index} holds the secret`);
  for (const p of fleet.procs) assert.ok(!p.output().includes(SECRET_CORE), `${p.name}'s logs hold the secret`);
  const keys = await redis.client.keys(`${fleet.cfg.prefix}:goal:${goalId}*`);
  assert.ok(
    keys.some((k) => k.includes(':thread:')),
    'the transcripts were kept',
  );
  for (const k of keys) {
    const type = await redis.client.type(k);
    const dump =
      type === 'string'
        ? await redis.client.get(k)
        : type === 'hash'
          ? JSON.stringify(await redis.client.hgetall(k))
          : type === 'stream'
            ? JSON.stringify(await redis.client.xrange(k, '-', '+'))
            : '';
    assert.ok(!String(dump).includes(SECRET_CORE), `${k} holds the secret`);
  }
});

test('a server killed mid-goal is reconnected and the goal finishes', async () => {
  const before = serverPid('everything');
  const { goalId, g } = await runGoal('mcp-echo', 'kill');
  assert.equal(g.status, 'done');
  assert.equal(await fleet.client.read(goalId, 'kill.md'), 'answer: Echo: after');
  const out = worker('worker-mcp-echo').output();
  assert.match(out, /MCP server \\"everything\\" connection lost: the connection closed; retrying in \d+ ms/);
  const after = serverPid('everything');
  assert.ok(after && after !== before, 'a new server process was started');
});

test("a call past the server's timeoutMs is cancelled and comes back as an error result", async () => {
  const { goalId, g } = await runGoal('mcp-slow', 'timeout');
  assert.equal(g.status, 'done');
  const [first, second] = scenarioRequests('timeout');
  const result = (second!.body.messages.at(-1)!.content as WireToolResult[])[0]!;
  assert.equal(result.is_error, true);
  assert.match(
    String(result.content),
    /MCP tool "trigger-long-running-operation" of server "slow" timed out after 1000 ms: the call was cancelled/,
  );
  const waited = second!.receivedAt - first!.receivedAt;
  assert.ok(waited >= 1000 && waited < 10_000, `the call took ${waited} ms`);
  assert.match(String(await fleet.client.read(goalId, 'timeout.md')), /^result: error: /);
});

test('cancelling the goal aborts an in-flight MCP call', async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('mcp-echo', 'cancel') });
  const w = worker('worker-mcp-echo');
  const started = () =>
    logLines(w.output()).some(
      (l) => l.msg === 'MCP tool call started' && l.goalId === goalId && l.tool === 'trigger-long-running-operation',
    );
  await until(started, 30_000);
  const cancelledAt = Date.now();
  await fleet.client.cancel(goalId);
  const queue = fleet.client.queues.get(subagentQueueName('mcp-echo'));
  const job = await until(async () => {
    const j = await queue.getJob(`${goalId}:1:0`);
    return j?.finishedOn ? j : undefined;
  }, 10_000);
  assert.equal(job.returnvalue?.skipped, 'cancelled', JSON.stringify(job.returnvalue));
  assert.ok(job.finishedOn! - cancelledAt < 3000, `the job ended ${job.finishedOn! - cancelledAt} ms after the cancel`);
  const call = await until(() => logLines(w.output()).find((l) => l.msg === 'MCP tool call' && l.goalId === goalId));
  assert.equal(call.status, 'cancelled');
  assert.ok((call.ms as number) < 10_000);
  // Its 30 s operation was cut short: the next goal's call goes through at once.
  const { g } = await runGoal('mcp-echo', 'echo');
  assert.equal(g.status, 'done');
});
