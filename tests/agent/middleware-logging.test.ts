// Structured logging: one JSON line per model call with the goal, step, role, thread and
// model it belongs to, its stop reason and usage; a failed call is a warning with the
// error. Prompts and answers are not logged, and neither is the API key.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import { type AgentSpec, RoleSpecSchema } from '../../shared/agent/roles.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import type { VirtualFs } from '../../shared/vfs/vfs.ts';
import { anthropicAt, captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import { apiError, FAKE_API_KEY, type MessagesApiServer, text, toolUse } from '../../testing/messages-api-server.ts';

let server: MessagesApiServer;
useMessagesApi(null, (s) => (server = s));

const SECRET_TASK = 'TASK-TEXT-THAT-MUST-NOT-BE-LOGGED';
const SECRET_ANSWER = 'ANSWER-TEXT-THAT-MUST-NOT-BE-LOGGED';
const spec: AgentSpec = RoleSpecSchema.parse({
  name: 'logger-role',
  systemPrompt: 'SYSTEM-PROMPT-NOT-LOGGED',
  tools: ['list_files'],
  tier: 'HIGH',
});
const ctx = ctxFor('logger-role', {
  goalId: 'loggoal0001',
  step: 4,
  threadId: 'goal-loggoal0001--logger-role-0badcafe',
});

function agentWith(logger: ReturnType<typeof captureLogger>['logger'], s: AgentSpec = spec) {
  return createAgent(s, {
    provider: anthropicAt(server),
    logger,
    models: { HIGH: 'model-for-logs', LOW: 'low' },
    retry: { baseDelayMs: 1, maxDelayMs: 5 },
  });
}

test('one structured line per model call, with goal, step, role, thread, model, stop reason and usage', async () => {
  // The real list_files tool over a goal with no files: what it lists is not the point here.
  const vfs = { index: async () => [] } as unknown as VirtualFs;
  const tools = createVfsTools(
    vfs,
    { goalId: ctx.goalId!, step: 4, role: 'logger-role', threadId: ctx.threadId!, writer: 'w' },
    spec.tools,
  );
  server.setHandler((body) =>
    body.messages.length === 1
      ? toolUse('list_files', {})
      : text(SECRET_ANSWER, { usage: { input_tokens: 11, output_tokens: 22 } }),
  );
  const { logger, lines, raw } = captureLogger();
  await agentWith(logger).run({ task: SECRET_TASK, tools, contract: textContract, ctx });
  const calls = lines.filter((l) => l.msg === 'model call');
  assert.equal(calls.length, 2);
  for (const l of calls) {
    assert.equal(l.level, 20, 'debug');
    assert.equal(l.goalId, 'loggoal0001');
    assert.equal(l.step, 4);
    assert.equal(l.role, 'logger-role');
    assert.equal(l.threadId, 'goal-loggoal0001--logger-role-0badcafe');
    assert.equal(l.model, 'model-for-logs', 'the routed model id, not the tier');
    assert.equal(typeof l.ms, 'number');
  }
  assert.deepEqual(
    calls.map((l) => l.stop),
    ['tool_use', 'end_turn'],
  );
  assert.equal((calls[1]!.usage as { input_tokens: number }).input_tokens, 11);
  assert.equal((calls[1]!.usage as { output_tokens: number }).output_tokens, 22);
  for (const secret of [SECRET_TASK, SECRET_ANSWER, 'SYSTEM-PROMPT-NOT-LOGGED', FAKE_API_KEY])
    assert.ok(!raw().includes(secret), `${secret} was logged`);
});

test('a failed call is one warning with the error; retries are logged inside it', async () => {
  server.setHandler((_b, i) => (i % 2 === 0 ? apiError(500, 'upstream exploded') : apiError(500, 'again')));
  const { logger, lines, raw } = captureLogger();
  await assert.rejects(agentWith(logger).run({ task: SECRET_TASK, contract: textContract, ctx }));
  const failed = lines.filter((l) => l.msg === 'model call failed');
  assert.equal(failed.length, 1, 'logging wraps the retry loop: one line per logical call');
  assert.equal(failed[0]!.level, 40, 'warn');
  assert.equal(failed[0]!.threadId, ctx.threadId);
  assert.match(String((failed[0]!.err as { message: string }).message), /anthropic API 500/);
  const retries = lines.filter((l) => l.msg === 'retrying model call');
  assert.equal(retries.length, 3);
  for (const r of retries) assert.equal(r.threadId, ctx.threadId);
  assert.ok(!raw().includes(FAKE_API_KEY));
});

test('logs name the model call only when the role lists the logging middleware', async () => {
  server.setHandler(() => text('ok'));
  const { logger, lines } = captureLogger();
  await agentWith(logger, { ...spec, middleware: spec.middleware.filter((m) => m !== 'logging') }).run({
    task: 'x',
    contract: textContract,
    ctx,
  });
  assert.equal(lines.filter((l) => l.msg === 'model call').length, 0);
});

test('a call aborted on purpose is an info line, and a job logger names the goal once per line', async () => {
  server.setHandler(async () => {
    await new Promise((r) => setTimeout(r, 2000));
    return text('late');
  });
  const { logger, raw } = captureLogger();
  // A job's logger already carries the goal, step, role and thread (services bind them).
  const job = logger.child({ goalId: ctx.goalId, step: ctx.step, role: ctx.role, threadId: ctx.threadId });
  const cancel = new AbortController();
  setTimeout(() => cancel.abort(new Error('goal cancelled')), 200);
  await assert.rejects(
    agentWith(job).run({ task: 'x', contract: textContract, ctx: { ...ctx, signal: cancel.signal } }),
    /aborted/,
  );
  const line = raw()
    .split('\n')
    .find((l) => l.includes('model call aborted'));
  assert.ok(line, `no 'model call aborted' line in ${raw()}`);
  const parsed = JSON.parse(line) as Record<string, unknown>;
  assert.equal(parsed.level, 30, 'info: nothing failed');
  for (const key of ['goalId', 'step', 'role', 'threadId']) {
    assert.equal(line.split(`"${key}":`).length - 1, 1, `${key} appears more than once: ${line}`);
  }
  assert.ok(!raw().includes('model call failed'));
});
