// Prompt caching of the growing history, on the wire (the real @anthropic-ai/sdk against the
// local Messages-API server): every request of a tool loop carries one breakpoint on its last
// message's last block, beside the system and tools ones, never more than 4; the agent's own
// history and its stored transcript never carry cache_control.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { LOOKBACK_BLOCKS } from '../../shared/agent/middleware/prompt-cache.ts';
import { codeContract, critiqueContract, summaryContract } from '../../shared/agent/output-contracts.ts';
import type { Message } from '../../shared/agent/providers/types.ts';
import type { AgentSpec, RoleSpec } from '../../shared/agent/roles.ts';
import { runForGoal } from '../../shared/agent/run-for-goal.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import { loadTranscript } from '../../shared/agent/transcripts.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  defaultAnswer,
  type MessageReply,
  type MessagesApiServer,
  type MessagesBody,
  type RecordedRequest,
  text,
  toolUse,
  type WireMessage,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
useMessagesApi(
  redis,
  (s, r) => {
    server = s;
    rt = r;
  },
  { runtime: true },
);

const FILES = Array.from({ length: 8 }, (_, i) => `module${i + 1}.py`);
const role = (name: string): RoleSpec => rt.cfg.roles.find((r) => r.name === name)!;
const toolsFor = (goalId: string, spec: AgentSpec) =>
  createVfsTools(rt.vfs, { goalId, step: 1, role: 'r', threadId: 't', writer: 'w' }, [
    'read_file',
    'list_files',
    ...(spec.tools.includes('write_file') ? (['write_file'] as const) : []),
  ]);

/** A code writer's 10 turns: list_files, 8 read_files, then the code. */
function tenTurnModel(body: MessagesBody): MessageReply {
  const turn = (body.messages.length + 1) / 2;
  if (turn === 1) return toolUse('list_files', {});
  if (turn <= 9) return toolUse('read_file', { name: FILES[turn - 2] });
  return text(defaultAnswer(body));
}

async function seedGoal(goalId: string): Promise<void> {
  await rt.goals.create(goalId, 'Cache the loop', {}, false);
  for (const name of FILES) {
    const body = `# ${name}\n${'def f(x):\n    return x * 2\n'.repeat(20)}`;
    await rt.vfs.write(goalId, name, body, { status: 'done', step: 1, writer: 'seed' });
  }
}

/** Where the request's breakpoints are: system block, tool and [message, block] indexes. */
function marks(body: MessagesBody) {
  const has = (b: unknown) => (b as { cache_control?: unknown }).cache_control !== undefined;
  const system = Array.isArray(body.system) ? body.system.flatMap((b, i) => (has(b) ? [i] : [])) : [];
  const tools = (body.tools ?? []).flatMap((t, i) => (has(t) ? [i] : []));
  const messages = body.messages.flatMap((m, i) =>
    typeof m.content === 'string' ? [] : m.content.flatMap((b, j) => (has(b) ? [[i, j] as const] : [])),
  );
  return { system, tools, messages };
}

const rawCount = (r: RecordedRequest) => (r.rawBody.match(/"cache_control":/g) ?? []).length;
const lastBlock = (m: WireMessage) => (typeof m.content === 'string' ? -1 : m.content.length - 1);

/** Messages compared by content: no cache_control, a string as the one text block it stands for. */
function unmarked(messages: (Message | WireMessage)[]): unknown[] {
  return JSON.parse(JSON.stringify(messages), (k, v) => (k === 'cache_control' ? undefined : v)).map(
    (m: WireMessage) => ({
      role: m.role,
      content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content,
    }),
  );
}

test('a 10-turn tool loop: every request carries one history breakpoint, on its last block', async () => {
  const goalId = 'pcacheloop01';
  await seedGoal(goalId);
  const spec = role('code-writer');
  assert.ok(spec.middleware.includes('prompt-cache'));
  server.setHandler(tenTurnModel);
  const from = server.requests.length;
  const threadId = threadIdFor(goalId, spec.name, '0000abcd');
  const out = await runForGoal(rt, {
    spec,
    goal: (await rt.goals.get(goalId))!,
    task: 'Write a module that doubles numbers, consistent with the existing modules.',
    contract: codeContract,
    ctx: { ...ctxFor(spec.name, { goalId }), threadId, step: 1 },
    log: rt.logger,
    tools: toolsFor(goalId, spec),
  });
  assert.equal(out.kind, 'ok', JSON.stringify(out));
  if (out.kind !== 'ok') return;
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 10, 'ten turns, ten requests');
  for (const [k, r] of reqs.entries()) {
    const where = `request ${k + 1} of 10`;
    assert.equal(r.response?.kind, 'message', `${where}: the server accepted it`);
    const at = marks(r.body);
    assert.deepEqual(at.system, [0], `${where}: the system prompt`);
    assert.deepEqual(at.tools, [r.body.tools!.length - 1], `${where}: the last tool`);
    const last = r.body.messages.length - 1;
    // The first request too: it offers tools, so a second turn will read the task from the cache.
    assert.deepEqual(at.messages, [[last, lastBlock(r.body.messages[last]!)]], `${where}: one, on the last block`);
    assert.equal(rawCount(r), 3, `${where}: 3 breakpoints in the body, within the API's 4`);
    if (k > 0) assert.equal(r.body.messages[last]!.role, 'user');
    if (k > 0) assert.equal((r.body.messages[last]!.content as { type: string }[]).at(-1)!.type, 'tool_result');
    assert.deepEqual(
      unmarked(r.body.messages),
      unmarked(out.run.messages.slice(0, r.body.messages.length)),
      `${where}: otherwise the agent's own history, as it is`,
    );
  }
  // The breakpoint moves: each request's marked block is sent unmarked by the next one.
  for (let k = 1; k < reqs.length; k++) {
    const prevLast = reqs[k - 1]!.body.messages.length - 1;
    assert.ok(
      marks(reqs[k]!.body).messages.every(([i]) => i !== prevLast),
      `request ${k + 1}: only the latest turn is marked`,
    );
  }
  assert.ok(!JSON.stringify(out.run.messages).includes('cache_control'), 'the agent history is never marked');
  const transcript = await loadTranscript(rt, threadId);
  assert.ok(transcript, 'the transcript was kept');
  assert.equal(transcript.messages.length, out.run.messages.length);
  assert.ok(!JSON.stringify(transcript).includes('cache_control'), 'no cache_control in the stored transcript');
  // Every call's usage is booked once: each before the next call, the last with the transcript.
  const sent = reqs.reduce((n, r) => {
    const u = (r.response!.body as { usage: Record<string, number> }).usage;
    return n + u.input_tokens! + u.output_tokens! + u.cache_read_input_tokens! + u.cache_creation_input_tokens!;
  }, 0);
  const booked = (await rt.goals.get(goalId))!.tokens;
  assert.equal(booked.input + booked.output + booked.cache_read + booked.cache_write, sent);
});

test('a turn of many parallel tool calls also marks where the previous request ended; never above 4', async () => {
  const goalId = 'pcachewide01';
  await seedGoal(goalId);
  const spec = role('research-specialist');
  const wide = LOOKBACK_BLOCKS; // tool_use + tool_result blocks: twice this, past the lookback
  server.setHandler((body) => {
    if (body.messages.length === 1)
      return {
        content: FILES.concat(FILES)
          .slice(0, wide)
          .map((name, i) => ({ type: 'tool_use' as const, id: `toolu_wide_${i}`, name: 'read_file', input: { name } })),
      };
    return body.messages.length === 3 ? toolUse('list_files', {}) : text(defaultAnswer(body));
  });
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const from = server.requests.length;
  const run = await agent.run({
    task: 'Summarize the modules.',
    tools: toolsFor(goalId, spec),
    contract: summaryContract,
    ctx: ctxFor(spec.name),
  });
  assert.equal(run.ok, true, run.problem);
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 3);
  assert.ok(reqs.every((r) => r.response?.kind === 'message' && rawCount(r) <= 4));
  // Request 2 adds 2 × LOOKBACK_BLOCKS blocks after the task: the task is marked again.
  const second = reqs[1]!.body.messages;
  assert.deepEqual(marks(reqs[1]!.body).messages, [
    [0, 0],
    [2, wide - 1],
  ]);
  assert.deepEqual(second[0], {
    role: 'user',
    content: [{ type: 'text', text: 'Summarize the modules.', cache_control: { type: 'ephemeral' } }],
  });
  assert.equal(rawCount(reqs[1]!), 4, 'system, tools, the previous end and the last block: the API maximum');
  // Request 3 adds 2 blocks: its own breakpoint finds request 2's prefix.
  assert.deepEqual(marks(reqs[2]!.body).messages, [[4, 0]]);
  assert.equal(rawCount(reqs[2]!), 3);
  assert.ok(!JSON.stringify(run.messages).includes('cache_control'));
});

test('an agent without tools marks a retry turn, not its first (nothing would read that write)', async () => {
  const spec: AgentSpec = { ...role('critic'), tools: [] };
  let n = 0;
  server.setHandler(() => (n++ === 0 ? text('not json') : text('[]')));
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const from = server.requests.length;
  const run = await agent.run({ task: 'Review it.', contract: critiqueContract, ctx: ctxFor('critic') });
  assert.equal(run.ok, true, run.problem);
  assert.equal(run.contractRetries, 1);
  const [first, retry] = server.requests.slice(from);
  assert.deepEqual(marks(first!.body), { system: [0], tools: [], messages: [] });
  assert.deepEqual(first!.body.messages, [{ role: 'user', content: 'Review it.' }]);
  const last = retry!.body.messages.length - 1;
  assert.deepEqual(marks(retry!.body).messages, [[last, 0]]);
  const reminder = retry!.body.messages[last]!.content as { type: string; text: string; cache_control?: unknown }[];
  assert.equal(reminder.length, 1);
  assert.equal(reminder[0]!.type, 'text');
  assert.match(reminder[0]!.text, /^Your answer was rejected: /);
  assert.deepEqual(reminder[0]!.cache_control, { type: 'ephemeral' });
  assert.ok(!JSON.stringify(run.messages).includes('cache_control'));
});

test('without the prompt-cache middleware no request of a 10-turn loop carries a breakpoint', async () => {
  const goalId = 'pcacheoff001';
  await seedGoal(goalId);
  const base = role('code-writer');
  const spec = { ...base, middleware: base.middleware.filter((m) => m !== 'prompt-cache') };
  server.setHandler(tenTurnModel);
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const from = server.requests.length;
  const run = await agent.run({
    task: 'Write a module that doubles numbers.',
    tools: toolsFor(goalId, spec),
    contract: codeContract,
    ctx: ctxFor(spec.name),
  });
  assert.equal(run.ok, true, run.problem);
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 10);
  for (const r of reqs) {
    assert.equal(rawCount(r), 0);
    assert.equal(r.body.system, spec.systemPrompt);
  }
});
