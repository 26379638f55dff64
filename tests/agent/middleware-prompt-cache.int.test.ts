// Anthropic prompt caching: cache_control on the system prompt and on the last tool, the
// system text itself unchanged (P52), and cache usage reported back. The history breakpoint
// (the latest turn) is tested in prompt-cache-history.int.test.ts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { contractFor, textContract } from '../../shared/agent/output-contracts.ts';
import { type AgentSpec, ROLE_CONTRACTS, type RoleContract, TOOL_NAMES } from '../../shared/agent/roles.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import type { Usage } from '../../shared/goal/store.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  defaultAnswer,
  type MessagesApiServer,
  type RecordedRequest,
  text,
  toolUse,
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

// The planner's spec has its own contract; caching does not depend on which one applies.
const roleContract = (spec: AgentSpec) =>
  (ROLE_CONTRACTS as readonly string[]).includes(spec.contract)
    ? contractFor(spec.contract as RoleContract)
    : textContract;

const builtin = (names: string[]) =>
  names.filter((n): n is (typeof TOOL_NAMES)[number] => (TOOL_NAMES as readonly string[]).includes(n));

async function run(spec: AgentSpec, withTools: boolean, usage: Usage[] = []) {
  const scope = { goalId: 'cachegoal01', step: 1, role: 'r', threadId: 't', writer: 'w' };
  const tools = withTools ? createVfsTools(rt.vfs, scope, builtin(spec.tools)) : undefined;
  const agent = createAgent(spec, {
    provider: rt.provider,
    logger: rt.logger,
    models: rt.cfg.models,
    usageSink: async (_ctx, _model, u) => void usage.push(u),
  });
  const from = server.requests.length;
  const res = await agent.run({ task: 'Go', tools, contract: roleContract(spec), ctx: ctxFor('r') });
  return { res, reqs: server.requests.slice(from), tools };
}

const breakpoints = (r: RecordedRequest) => (r.rawBody.match(/"cache_control":/g) ?? []).length;

test('cache_control marks the system prompt and the last tool, on every turn', async () => {
  const spec = rt.cfg.roles.find((r) => r.name === 'code-writer')!;
  assert.ok(spec.middleware.includes('prompt-cache'));
  server.setHandler((body) => (body.messages.length < 5 ? toolUse('list_files', {}) : text(defaultAnswer(body))));
  const { res, reqs, tools } = await run(spec, true);
  assert.equal(res.ok, true, res.problem);
  assert.equal(reqs.length, 3);
  for (const r of reqs) {
    assert.deepEqual(r.body.system, [{ type: 'text', text: spec.systemPrompt, cache_control: { type: 'ephemeral' } }]);
    const sent = r.body.tools!;
    assert.deepEqual(
      sent.map((t) => t.name),
      [...spec.tools],
    );
    sent.forEach((t, i) => {
      if (i === sent.length - 1) assert.deepEqual(t.cache_control, { type: 'ephemeral' });
      else assert.equal(t.cache_control, undefined);
      const { cache_control: _c, ...def } = t;
      assert.deepEqual(def, tools![i]!.def, 'the tool definition is otherwise unchanged');
    });
    // System, last tool and the latest turn: three, however long the conversation (the API allows 4).
    assert.equal(breakpoints(r), 3);
  }
  for (const t of tools!)
    assert.equal(
      (t.def as { cache_control?: unknown }).cache_control,
      undefined,
      'the shared tool definitions are not mutated',
    );
});

test('an agent without tools caches its system prompt only (its first turn is not marked)', async () => {
  server.setHandler((body) => text(defaultAnswer(body)));
  const spec = plannerSpec(rt.cfg);
  const { reqs } = await run(spec, false);
  assert.deepEqual(reqs[0]!.body.system, [
    { type: 'text', text: spec.systemPrompt, cache_control: { type: 'ephemeral' } },
  ]);
  assert.equal(reqs[0]!.body.tools, undefined);
  assert.equal(breakpoints(reqs[0]!), 1);
});

test('without the prompt-cache middleware nothing is marked and the system prompt is sent as is', async () => {
  server.setHandler((body) => (body.messages.length === 1 ? toolUse('list_files', {}) : text('done')));
  const base = rt.cfg.roles.find((r) => r.name === 'research-specialist')!;
  const spec = { ...base, middleware: base.middleware.filter((m) => m !== 'prompt-cache') };
  const { reqs } = await run(spec, true);
  for (const r of reqs) {
    assert.equal(r.body.system, spec.systemPrompt);
    assert.equal(breakpoints(r), 0);
  }
});

test('cache writes and reads reported by the API reach token accounting', async () => {
  // The server reports a cache write the first time it sees a cached system prompt and a
  // read afterwards, as the API does for a warm cache.
  server.setHandler((body) => text(defaultAnswer(body)));
  const spec: AgentSpec = {
    ...rt.cfg.roles.find((r) => r.name === 'critic')!,
    systemPrompt: `You are a critic. Unique prompt ${Date.now()}.`,
  };
  const usage: Usage[] = [];
  await run(spec, false, usage);
  await run(spec, false, usage);
  assert.equal(usage.length, 2);
  assert.ok(usage[0]!.cache_write > 0 && usage[0]!.cache_read === 0, JSON.stringify(usage[0]));
  assert.ok(usage[1]!.cache_read > 0 && usage[1]!.cache_write === 0, JSON.stringify(usage[1]));
  assert.equal(usage[0]!.cache_write, usage[1]!.cache_read);
});
