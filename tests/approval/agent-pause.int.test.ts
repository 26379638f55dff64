// The agent loop's side of approvals, through the real AnthropicProvider and SDK against the
// local Messages-API server, with the real VFS tools on a private Redis: a turn calling a
// gated tool runs none of its tools and pauses with a checkpoint; resuming from that
// checkpoint (after a JSON round trip, as Redis stores it) runs the turn's tools with the
// decisions and goes on without asking the model for that turn again.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AgentCheckpoint, ApprovalPause, approvalGate } from '../../shared/agent/approval.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { codeContract } from '../../shared/agent/output-contracts.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  blockText,
  type MessageReply,
  type MessagesApiServer,
  text,
  type WireMessage,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
let seq = 0;
useMessagesApi(
  redis,
  (s, r) => {
    server = s;
    rt = r;
  },
  { runtime: true },
);

const CODE = '```python\nprint(1)\n```';

/** One turn: an edit (not gated) and a write (gated), in that order. */
const EDIT_AND_WRITE: MessageReply = {
  content: [
    { type: 'text', text: 'editing, then writing' },
    {
      type: 'tool_use',
      id: 'toolu_edit',
      name: 'edit_file',
      input: { name: 'a.py', old_string: 'x', new_string: 'y' },
    },
    { type: 'tool_use', id: 'toolu_write', name: 'write_file', input: { name: 'b.py', content: 'print(2)\n' } },
  ],
  stop_reason: 'tool_use',
};

async function setup() {
  const goalId = `pausegoal${(++seq).toString().padStart(3, '0')}`;
  await rt.vfs.write(goalId, 'a.py', 'x = 1\n', { status: 'active', step: 1, writer: 'seed' });
  const spec = { ...rt.cfg.roles.find((r) => r.name === 'code-writer')!, approval: ['write_file'] };
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const threadId = `goal-${goalId}--code-writer-0000abcd`;
  const tools = createVfsTools(rt.vfs, { goalId, step: 1, role: 'code-writer', threadId, writer: 'w' }, spec.tools);
  const from = server.requests.length;
  const base = { task: 'Write code', tools, contract: codeContract, ctx: ctxFor('code-writer', { goalId, threadId }) };
  return { goalId, agent, base, reqs: () => server.requests.slice(from) };
}

async function pauseOf(p: Promise<unknown>): Promise<AgentCheckpoint> {
  const err = await p.then(
    () => assert.fail('the run did not pause'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ApprovalPause, `expected an ApprovalPause, got ${err}`);
  // What the job stores and reads back.
  return JSON.parse(JSON.stringify(err.checkpoint)) as AgentCheckpoint;
}

function results(m: WireMessage | undefined): WireToolResult[] {
  assert.ok(m && Array.isArray(m.content));
  return (m.content as WireToolResult[]).filter((b) => b.type === 'tool_result');
}

test('a gated call pauses its turn before any tool runs; approved, the turn runs, not asked again', async () => {
  const s = await setup();
  server.setHandler((body) => (body.messages.length === 1 ? EDIT_AND_WRITE : text(CODE)));
  const gate = approvalGate(['write_file']);
  const cp = await pauseOf(s.agent.run({ ...s.base, approval: gate }));

  assert.equal(s.reqs().length, 1);
  assert.equal(await rt.vfs.read(s.goalId, 'a.py'), 'x = 1\n', 'the ungated edit of the paused turn ran');
  assert.equal(await rt.vfs.read(s.goalId, 'b.py'), null, 'the gated write ran');
  assert.deepEqual(cp.awaiting, [{ index: 1, tool: 'write_file' }]);
  assert.deepEqual(
    cp.uses.map((u) => u.id),
    ['toolu_edit', 'toolu_write'],
  );
  assert.deepEqual([cp.messages.length, cp.turns, cp.phaseTurns, cp.contractRetry], [2, 1, 1, false]);

  const approved = approvalGate(['write_file'], new Map([[1, { status: 'approved' as const }]]));
  const run = await s.agent.run({ ...s.base, task: '', approval: approved, resume: cp });
  assert.equal(run.ok, true, run.problem);
  assert.equal(run.turns, 2);
  const reqs = s.reqs();
  assert.equal(reqs.length, 2, 'the paused turn was asked again, or the run did not go on');
  const msgs = reqs[1]!.body.messages;
  assert.deepEqual(msgs[0], { role: 'user', content: 'Write code' }, 'the resumed run lost its task');
  assert.deepEqual(
    results(msgs[2]).map((r) => [r.tool_use_id, r.is_error ?? false]),
    [
      ['toolu_edit', false],
      ['toolu_write', false],
    ],
  );
  assert.equal(await rt.vfs.read(s.goalId, 'a.py'), 'y = 1\n');
  assert.equal(await rt.vfs.read(s.goalId, 'b.py'), 'print(2)\n');
});

test('an approved at-most-once call whose run died once it was marked started is not made again', async () => {
  const s = await setup();
  server.setHandler((body) => (body.messages.length === 1 ? EDIT_AND_WRITE : text(CODE)));
  // write_file as an MCP tool with outside effects would be: never run twice.
  const tools = s.base.tools.map((t) => (t.def.name === 'write_file' ? { ...t, atMostOnce: true } : t));
  const cp = await pauseOf(s.agent.run({ ...s.base, tools, approval: approvalGate(['write_file']) }));
  const approved = approvalGate(['write_file'], new Map([[1, { status: 'approved' as const }]]));
  let marked: AgentCheckpoint | undefined;
  const died = new Error('the process died');
  const onToolStart = async (c: AgentCheckpoint) => {
    marked = JSON.parse(JSON.stringify(c)) as AgentCheckpoint;
    throw died;
  };
  await assert.rejects(s.agent.run({ ...s.base, tools, approval: approved, resume: cp, onToolStart }), died);
  assert.equal(marked?.started, 1, 'the write was not marked started');
  assert.deepEqual(marked?.awaiting, cp.awaiting, 'the mark lost the decided calls');
  assert.equal(await rt.vfs.read(s.goalId, 'b.py'), null, 'the write ran although its mark failed');

  const run = await s.agent.run({ ...s.base, tools, approval: approved, resume: marked, onToolStart });
  assert.equal(run.ok, true, run.problem);
  assert.equal(await rt.vfs.read(s.goalId, 'b.py'), null, 'the write was made again');
  assert.equal(await rt.vfs.read(s.goalId, 'a.py'), 'y = 1\n', 'the edit done before it');
  const reqs = s.reqs();
  assert.equal(reqs.length, 2, 'the paused turn was asked again');
  const [edit, write] = results(reqs[1]!.body.messages[2]);
  assert.equal(edit!.is_error ?? false, false);
  assert.equal(write!.is_error, true);
  assert.match(String(write!.content), /not run again: .*whether it took effect is unknown/);
});

test('a rejected call is not run and the model reads why; an undecided one pauses again, no request', async () => {
  const s = await setup();
  server.setHandler((body) => (body.messages.length === 1 ? EDIT_AND_WRITE : text(CODE)));
  const cp = await pauseOf(s.agent.run({ ...s.base, approval: approvalGate(['write_file']) }));

  const again = await pauseOf(s.agent.run({ ...s.base, approval: approvalGate(['write_file']), resume: cp }));
  assert.deepEqual(again, cp);
  assert.equal(s.reqs().length, 1, 'an undecided resume asked the model');

  const rejected = new Map([[1, { status: 'rejected' as const, reason: 'no writes on Fridays' }]]);
  const run = await s.agent.run({ ...s.base, approval: approvalGate(['write_file'], rejected), resume: cp });
  assert.equal(run.ok, true, run.problem);
  const [edit, write] = results(s.reqs()[1]!.body.messages[2]);
  assert.equal(edit!.is_error ?? false, false);
  assert.equal(write!.is_error, true);
  assert.match(String(write!.content), /^error: a human rejected this call, it was not run: no writes on Fridays$/);
  assert.equal(await rt.vfs.read(s.goalId, 'b.py'), null, 'a rejected write ran');
  assert.equal(await rt.vfs.read(s.goalId, 'a.py'), 'y = 1\n');
});

test('a pause during the contract retry resumes in that phase', async () => {
  const s = await setup();
  server.setHandler((body) => {
    if (body.messages.length === 1) return text('not code at all');
    if (body.messages.length === 3) return EDIT_AND_WRITE;
    return text(CODE);
  });
  const cp = await pauseOf(s.agent.run({ ...s.base, approval: approvalGate(['write_file']) }));
  assert.deepEqual([cp.turns, cp.phaseTurns, cp.contractRetry], [2, 1, true]);
  const approved = approvalGate(['write_file'], new Map([[1, { status: 'approved' as const }]]));
  const run = await s.agent.run({ ...s.base, approval: approved, resume: cp });
  assert.deepEqual([run.ok, run.contractRetries, run.turns, run.text], [true, 1, 3, CODE]);
  assert.equal(s.reqs().length, 3);
  assert.match(blockText(s.reqs()[1]!.body.messages[2]!.content), /^Your answer was rejected/);
});

test("a tool picked by 'mcp:<server>/*' is gated by its own name, though its label is the server's '*'", async () => {
  const s = await setup();
  // As McpManager offers a tool past the labels it keeps apart: counted under '*', named for approval.
  let ran = 0;
  const danger = {
    def: { name: 'mcp__srv__danger', description: 'Danger.', input_schema: { type: 'object' as const } },
    label: 'mcp:srv/*',
    approvalName: 'mcp:srv/danger',
    run: async () => `ran ${++ran}`,
  };
  const call = { type: 'tool_use' as const, id: 'toolu_danger', name: 'mcp__srv__danger', input: {} };
  server.setHandler((body) => (body.messages.length === 1 ? { content: [call], stop_reason: 'tool_use' } : text(CODE)));
  const cp = await pauseOf(
    s.agent.run({ ...s.base, tools: [...s.base.tools, danger], approval: approvalGate(['mcp:srv/danger']) }),
  );
  assert.equal(ran, 0, 'the gated call ran');
  assert.deepEqual(cp.awaiting, [{ index: 0, tool: 'mcp:srv/danger' }]);
});
