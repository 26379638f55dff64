// The tool loop (seed 004) through the real AnthropicProvider and SDK against a local
// Messages-API server, with the real VFS tools on a private Redis.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAgent, TRUNCATION_MARKER } from '../../shared/agent/create-agent.ts';
import { codeContract, summaryContract, textContract } from '../../shared/agent/output-contracts.ts';
import { type RoleSpec, RoleSpecSchema, TOOL_NAMES } from '../../shared/agent/roles.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  type AnswerToolUse,
  type MessagesApiServer,
  type RecordedRequest,
  text,
  toolUse,
  type WireMessage,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
let goalSeq = 0;
useMessagesApi(
  redis,
  (s, r) => {
    server = s;
    rt = r;
  },
  { runtime: true },
);

function role(name: string, over: Partial<RoleSpec> = {}): RoleSpec {
  const r = rt.cfg.roles.find((x) => x.name === name)!;
  return { ...r, ...over };
}

function newGoal(): string {
  return `loopgoal${(++goalSeq).toString().padStart(4, '0')}`;
}

function setup(roleName: string, over: Partial<RoleSpec> = {}, goalId = newGoal()) {
  const spec = role(roleName, over);
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const threadId = `goal-${goalId}--${roleName}-0000abcd`;
  const tools = createVfsTools(rt.vfs, { goalId, step: 1, role: roleName, threadId, writer: 'test' }, spec.tools);
  const from = server.requests.length;
  return {
    spec,
    agent,
    tools,
    goalId,
    ctx: ctxFor(roleName, { goalId, threadId }),
    reqs: (): RecordedRequest[] => server.requests.slice(from),
  };
}

function toolResults(m: WireMessage | undefined): WireToolResult[] {
  assert.ok(m && Array.isArray(m.content), 'expected a message with content blocks');
  return (m.content as WireToolResult[]).filter((b) => b.type === 'tool_result');
}

test('the loop runs tool calls and stops as soon as the model stops calling tools', async () => {
  const s = setup('code-writer');
  await rt.vfs.write(s.goalId, 'notes.md', 'hello', { status: 'done', step: 1, writer: 'seed' });
  server.setHandler((body) =>
    body.messages.length === 1 ? toolUse('list_files', {}) : text('```python\nprint(1)\n```'),
  );
  const run = await s.agent.run({ task: 'Write code', tools: s.tools, contract: codeContract, ctx: s.ctx });
  assert.equal(run.ok, true, run.problem);
  assert.equal(run.turns, 2);
  const reqs = s.reqs();
  assert.equal(reqs.length, 2, 'one request per turn, none after the final answer');
  const msgs = reqs[1]!.body.messages;
  assert.equal(msgs.length, 3);
  assert.deepEqual(msgs[0], { role: 'user', content: 'Write code' });
  assert.equal(msgs[1]!.role, 'assistant');
  const [result] = toolResults(msgs[2]);
  const use = (msgs[1]!.content as { type: string; id: string }[]).find((b) => b.type === 'tool_use')!;
  assert.equal(result!.tool_use_id, use.id);
  assert.equal(result!.is_error, undefined);
  assert.equal(result!.content, '- notes.md [done, 5 bytes]');
});

test('a tool input nested thousands of levels deep is not run, and the run stays serialisable', async () => {
  const s = setup('code-writer');
  const deep = `{"glob":"*","x":${'['.repeat(5000)}${']'.repeat(5000)}}`;
  server.setHandler((body) => {
    if (body.messages.length > 1) return text('```python\nprint(1)\n```');
    const reply = toolUse('list_files', {});
    (reply.content[0] as AnswerToolUse).inputJson = deep;
    return reply;
  });
  const checkpoints: string[] = [];
  const run = await s.agent.run({
    task: 'Write code',
    tools: s.tools,
    contract: codeContract,
    ctx: s.ctx,
    // What the worker stores after each call: it threw RangeError on every attempt.
    onToolCall: (_call, checkpoint) => void checkpoints.push(JSON.stringify(checkpoint)),
  });
  assert.equal(run.ok, true, run.problem);
  const [result] = toolResults(s.reqs()[1]!.body.messages[2]);
  assert.equal(result!.is_error, true);
  assert.match(String(result!.content), /not run: the input nests deeper than 64 levels/);
  assert.equal(checkpoints.length, 1);
  assert.ok(JSON.stringify(run.messages).length < 2000, 'the deep input is not kept');
});

test('the loop stops at maxTurns (30 by default, per role) without a final answer', async () => {
  assert.equal(RoleSpecSchema.parse({ name: 'x', systemPrompt: 'p' }).maxTurns, 30);
  server.setHandler(() => toolUse('list_files', {}));

  const small = setup('research-specialist', { maxTurns: 4 });
  let toolRuns = 0;
  const r4 = await small.agent.run({
    task: 'Loop forever',
    tools: small.tools,
    contract: summaryContract,
    ctx: small.ctx,
    onToolCall: () => void toolRuns++,
  });
  assert.equal(r4.ok, false);
  assert.equal(r4.turns, 4);
  assert.match(r4.problem!, /turn limit \(4\)/);
  assert.equal(small.reqs().length, 4);
  // The 4th turn's tool call is not run: no turn is left to read its result.
  assert.equal(toolRuns, 3);

  const dflt = setup('research-specialist');
  assert.equal(dflt.spec.maxTurns, 30);
  const r30 = await dflt.agent.run({
    task: 'Loop forever',
    tools: dflt.tools,
    contract: summaryContract,
    ctx: dflt.ctx,
  });
  assert.equal(r30.ok, false);
  assert.equal(dflt.reqs().length, 30);
  assert.match(r30.problem!, /turn limit \(30\)/);
});

test('each tool result is truncated at 50,000 characters with a marker', async () => {
  assert.equal(rt.cfg.vfs.toolResultMaxChars, 50_000);
  const s = setup('research-specialist');
  const big = `${'a'.repeat(49_990)}BOUNDARY!!${'b'.repeat(10_000)}TAIL`;
  const exact = 'c'.repeat(50_000);
  await rt.vfs.write(s.goalId, 'big.txt', big, { status: 'done', step: 1, writer: 'seed' });
  await rt.vfs.write(s.goalId, 'exact.txt', exact, { status: 'done', step: 1, writer: 'seed' });
  server.setHandler((body) =>
    body.messages.length === 1
      ? {
          content: [
            { type: 'tool_use', id: 'toolu_big', name: 'read_file', input: { name: 'big.txt' } },
            { type: 'tool_use', id: 'toolu_exact', name: 'read_file', input: { name: 'exact.txt' } },
          ],
        }
      : text('summary of the files'),
  );
  const run = await s.agent.run({ task: 'Read both', tools: s.tools, contract: summaryContract, ctx: s.ctx });
  assert.equal(run.ok, true);
  const [bigRes, exactRes] = toolResults(s.reqs()[1]!.body.messages[2]);
  assert.equal(bigRes!.tool_use_id, 'toolu_big');
  assert.equal(bigRes!.content, big.slice(0, 50_000) + TRUNCATION_MARKER);
  assert.ok(String(bigRes!.content).endsWith(TRUNCATION_MARKER));
  assert.match(TRUNCATION_MARKER, /truncated/);
  assert.ok(!String(bigRes!.content).includes('TAIL'));
  assert.equal(exactRes!.content, exact, 'a result of exactly the limit is not truncated');
});

test('a lone surrogate in a tool result or error goes to the model as U+FFFD', async () => {
  const s = setup('research-specialist');
  // Half an emoji, as a server that cut its text by UTF-16 units sends it.
  const tool = (name: string, run: () => Promise<string>) => ({
    def: { name, description: name, input_schema: { type: 'object' as const, properties: {} } },
    run,
  });
  const tools = [
    ...s.tools,
    tool('half', async () => 'cut here \ud83d'),
    tool('broken', async () => {
      throw new Error('failed at \udc00 here');
    }),
  ];
  server.setHandler((body) =>
    body.messages.length === 1
      ? {
          content: [
            { type: 'tool_use', id: 'toolu_half', name: 'half', input: {} },
            { type: 'tool_use', id: 'toolu_broken', name: 'broken', input: {} },
          ],
        }
      : text('summary of both'),
  );
  const run = await s.agent.run({ task: 'Call both', tools, contract: summaryContract, ctx: s.ctx });
  assert.equal(run.ok, true, run.problem);
  const [half, broken] = toolResults(s.reqs()[1]!.body.messages[2]);
  assert.equal(half!.content, 'cut here \ufffd');
  assert.equal(broken!.content, 'error: failed at \ufffd here');
  assert.equal(broken!.is_error, true);
});

test("a turn's results together stop at 4 results' limit: the rest are cut, then not run", async () => {
  const s = setup('research-specialist');
  // 30,000 chars a file, 10 reads in one turn: 200,000 fit in 6 and a bit.
  for (let i = 0; i < 10; i++) {
    await rt.vfs.write(s.goalId, `f${i}.txt`, String(i).repeat(30_000), { status: 'done', step: 1, writer: 'seed' });
  }
  const reads = Array.from({ length: 10 }, (_, i) => ({
    type: 'tool_use' as const,
    id: `toolu_f${i}`,
    name: 'read_file',
    input: { name: `f${i}.txt` },
  }));
  server.setHandler((body) =>
    body.messages.length === 1 ? { content: reads, stop_reason: 'tool_use' } : text('summary of the files'),
  );
  const run = await s.agent.run({ task: 'Read them all', tools: s.tools, contract: summaryContract, ctx: s.ctx });
  assert.equal(run.ok, true, run.problem);
  const results = toolResults(s.reqs()[1]!.body.messages[2]);
  assert.equal(results.length, 10, 'every call gets a result');
  const sizes = results.map((r) => String(r.content).length);
  for (const r of results.slice(0, 6)) assert.equal(r.content, String(r.tool_use_id.slice(-1)).repeat(30_000));
  assert.equal(results[6]!.content, '6'.repeat(20_000) + TRUNCATION_MARKER, 'cut to what was left of the turn');
  for (const r of results.slice(7)) {
    assert.equal(r.is_error, true);
    assert.match(String(r.content), /^not run: this turn's tool results reached their limit \(200000 chars\)/);
  }
  assert.ok(sizes.reduce((a, b) => a + b, 0) < 201_000, `the turn sent ${sizes.join('+')} chars`);
});

test('an unknown tool or bad arguments return an error result and the loop goes on', async () => {
  const s = setup('code-writer');
  server.setHandler((body) =>
    body.messages.length === 1
      ? {
          content: [
            { type: 'text', text: 'Let me try some tools.' },
            { type: 'tool_use', id: 'toolu_unknown', name: 'spawn_agent', input: { prompt: 'do it for me' } },
            { type: 'tool_use', id: 'toolu_badargs', name: 'read_file', input: { path: 'x.md' } },
            { type: 'tool_use', id: 'toolu_missing', name: 'read_file', input: { name: 'missing.md' } },
            { type: 'tool_use', id: 'toolu_nocontent', name: 'write_file', input: { name: 'ok.md' } },
            {
              type: 'tool_use',
              id: 'toolu_badname',
              name: 'write_file',
              input: { name: '../escape.md', content: 'x' },
            },
            { type: 'tool_use', id: 'toolu_ok', name: 'list_files', input: {} },
          ],
        }
      : text('```js\nconsole.log(1)\n```'),
  );
  const run = await s.agent.run({ task: 'Try tools', tools: s.tools, contract: codeContract, ctx: s.ctx });
  assert.equal(run.ok, true, run.problem);
  assert.equal(run.text, '```js\nconsole.log(1)\n```');
  const results = new Map(toolResults(s.reqs()[1]!.body.messages[2]).map((r) => [r.tool_use_id, r]));
  assert.equal(results.size, 6, 'every tool_use gets its tool_result');
  const err = (id: string, re: RegExp) => {
    const r = results.get(id)!;
    assert.equal(r.is_error, true, `${id} should be an error result`);
    assert.match(String(r.content), re);
  };
  err('toolu_unknown', /unknown tool "spawn_agent" \(available: read_file, list_files, write_file, edit_file, grep\)/);
  err('toolu_badargs', /bad arguments for read_file/);
  err('toolu_missing', /no such file: missing\.md/);
  err('toolu_nocontent', /bad arguments for write_file: content/);
  err('toolu_badname', /"\.\.\/escape\.md" contains "\.\."/);
  assert.equal(results.get('toolu_ok')!.is_error, undefined);
  assert.equal(await rt.vfs.stat(s.goalId, 'ok.md'), null, 'a write with bad arguments writes nothing');
});

test('only the final text returns, not intermediate text or tool traffic', async () => {
  const s = setup('research-specialist');
  server.setHandler((body) =>
    body.messages.length === 1
      ? toolUse('list_files', {}, { text: 'I will first look at the files.' })
      : {
          content: [
            { type: 'text', text: 'Paris is the capital of France [1].' },
            { type: 'text', text: '\n\n[1] atlas' },
          ],
        },
  );
  const run = await s.agent.run({ task: 'Capital of France?', tools: s.tools, contract: summaryContract, ctx: s.ctx });
  assert.equal(run.ok, true);
  assert.equal(run.text, 'Paris is the capital of France [1].\n\n[1] atlas');
  assert.equal(run.value, run.text);
  assert.ok(!run.text.includes('I will first look'));
});

test('subagent tools are the six virtual-FS tools: none dispatches an agent', async () => {
  assert.deepEqual([...TOOL_NAMES].sort(), [
    'delete_file',
    'edit_file',
    'grep',
    'list_files',
    'read_file',
    'write_file',
  ]);
  assert.equal(
    RoleSpecSchema.safeParse({ name: 'boss', systemPrompt: 'p', tools: ['task'] }).success,
    false,
    'a role cannot be given a dispatch tool',
  );
  server.setHandler(() => text('ok'));
  for (const r of rt.cfg.roles) {
    const s = setup(r.name);
    assert.ok(s.spec.tools.every((t) => (TOOL_NAMES as readonly string[]).includes(t)));
    await s.agent.run({ task: 'hi', tools: s.tools, contract: textContract, ctx: s.ctx });
    const sent = s.reqs()[0]!.body.tools!.map((t) => t.name);
    assert.deepEqual(sent, [...s.spec.tools], `${r.name}: the request offers exactly the role's tools`);
  }
  // Running every tool touches the goal's files only: no job, no queue, no model call.
  const s = setup('code-writer', { tools: [...TOOL_NAMES] });
  const before = server.requests.length;
  const byName = new Map(s.tools.map((t) => [t.def.name, t]));
  await byName.get('write_file')!.run({ name: 'a.md', content: 'A' });
  assert.equal(await byName.get('read_file')!.run({ name: 'a.md' }), 'A');
  assert.match(await byName.get('edit_file')!.run({ name: 'a.md', old_string: 'A', new_string: 'B' }), /edited/);
  assert.match(await byName.get('grep')!.run({ pattern: 'B' }), /^a\.md:1: B$/m);
  assert.match(await byName.get('list_files')!.run({}), /a\.md/);
  assert.equal(await byName.get('delete_file')!.run({ name: 'a.md' }), 'deleted a.md');
  assert.equal(server.requests.length, before, 'no tool calls the model');
  const keys = await rt.redis.keys(`${rt.cfg.prefix}:*`);
  assert.ok(keys.length > 0);
  for (const k of keys)
    assert.ok(k.startsWith(`${rt.cfg.prefix}:goal:`), `unexpected key ${k}: tools must not enqueue work`);
});

test("tools cannot reach another goal's files by any name", async () => {
  const victim = newGoal();
  await rt.vfs.write(victim, 'secret.md', 'TOP-SECRET-OF-VICTIM', { status: 'done', step: 1, writer: 'victim' });
  const s = setup('code-writer');
  const p = rt.cfg.prefix;
  const names = [
    'secret.md',
    `../${victim}/secret.md`,
    `${victim}/secret.md`,
    `goal:${victim}:content`,
    `${p}:goal:${victim}:content`,
    '/etc/passwd',
    'x/../../secret.md',
    `..\\${victim}\\secret.md`,
    'secret.md\u0000',
    'a'.repeat(10_000),
  ];
  server.setHandler((body) =>
    body.messages.length === 1
      ? {
          content: [
            ...names.map((name, i) => ({
              type: 'tool_use' as const,
              id: `toolu_r${i}`,
              name: 'read_file',
              input: { name },
            })),
            { type: 'tool_use', id: 'toolu_goalarg', name: 'read_file', input: { name: 'secret.md', goalId: victim } },
            {
              type: 'tool_use',
              id: 'toolu_w',
              name: 'write_file',
              input: { name: 'secret.md', content: 'overwritten?' },
            },
            {
              type: 'tool_use',
              id: 'toolu_w2',
              name: 'write_file',
              input: { name: `../${victim}/secret.md`, content: 'overwritten?' },
            },
            { type: 'tool_use', id: 'toolu_l', name: 'list_files', input: {} },
          ],
        }
      : text('```\ndone\n```'),
  );
  const run = await s.agent.run({ task: 'Steal', tools: s.tools, contract: codeContract, ctx: s.ctx });
  assert.equal(run.ok, true);
  const req = s.reqs()[1]!;
  assert.ok(!req.rawBody.includes('TOP-SECRET-OF-VICTIM'), "another goal's content reached the model");
  const results = new Map(toolResults(req.body.messages[2]).map((r) => [r.tool_use_id, r]));
  for (let i = 0; i < names.length; i++)
    assert.equal(
      results.get(`toolu_r${i}`)!.is_error,
      true,
      `read of ${JSON.stringify(names[i]!.slice(0, 40))} must fail`,
    );
  assert.equal(results.get('toolu_goalarg')!.is_error, true);
  assert.equal(results.get('toolu_w2')!.is_error, true);
  assert.equal(
    results.get('toolu_l')!.content,
    `- secret.md [active, ${'overwritten?'.length} bytes]`,
    'the list shows only this goal',
  );
  // The victim's file is untouched.
  assert.equal(await rt.vfs.read(victim, 'secret.md'), 'TOP-SECRET-OF-VICTIM');
  assert.equal((await rt.vfs.stat(victim, 'secret.md'))!.version, 1);
  assert.deepEqual(
    (await rt.vfs.index(victim)).map((e) => e.name),
    ['secret.md'],
  );
});
