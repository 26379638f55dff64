// The tool registry through the real agent loop: the real AnthropicProvider and SDK against a
// local Messages-API server. A spec's zod schema is both the input_schema the model is sent
// and the check its input passes before `run`; a bad input, an unknown tool or a thrown error
// comes back to the model as an is_error result naming the problem, and the run goes on. Each
// call is counted and timed under its configured name (`unknown` for a name the model made up).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { createAgent, type ToolCallRecord, TRUNCATION_MARKER } from '../../shared/agent/create-agent.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import { type AgentSpec, AgentSpecSchema } from '../../shared/agent/roles.ts';
import {
  bindTool,
  defineTool,
  type Tool,
  type ToolContext,
  ToolRegistry,
  toolContext,
  toolDef,
} from '../../shared/agent/tools.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  type MessagesApiServer,
  text,
  toolUse,
  type WireMessage,
  type WireToolResult,
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

const seen: ToolContext[] = [];
const counter = defineTool({
  name: 'count_words',
  description: 'Count the words of a text.',
  input: z
    .object({
      text: z.string().describe('The text.'),
      min_length: z.number().int().min(1, 'min_length must be 1 or more').default(1),
    })
    .strict(),
  async run({ text, min_length }, ctx) {
    seen.push(ctx);
    return String(text.split(/\s+/).filter((w) => w.length >= min_length).length);
  },
});
const failing = defineTool({
  name: 'explode',
  description: 'Always fails.',
  input: z.object({}).strict(),
  async run() {
    throw new Error('the disk is on fire');
  },
});
const huge = defineTool({
  name: 'huge',
  description: 'Returns a lot.',
  input: z.object({ n: z.number().int().min(0) }).strict(),
  async run({ n }) {
    return 'x'.repeat(n);
  },
});

const registry = new ToolRegistry([counter, failing, huge]);
const scope = {
  goalId: 'reggoal0001',
  step: 7,
  role: 'tool-role',
  threadId: 'goal-reggoal0001--tool-role-1',
  writer: 'w1',
};

function spec(): AgentSpec {
  return AgentSpecSchema.parse({
    systemPrompt: 'You use tools.',
    tools: [],
    maxTurns: 5,
    middleware: ['tier-routing', 'tokens'],
  });
}

function results(m: WireMessage | undefined): Map<string, WireToolResult> {
  assert.ok(m && Array.isArray(m.content));
  const rs = (m.content as WireToolResult[]).filter((b) => b.type === 'tool_result');
  return new Map(rs.map((r) => [r.tool_use_id, r]));
}

test("a spec's zod schema becomes the input_schema the model is sent", () => {
  const def = toolDef(counter);
  assert.deepEqual(def, {
    name: 'count_words',
    description: 'Count the words of a text.',
    input_schema: {
      type: 'object',
      properties: {
        text: { type: 'string', description: 'The text.' },
        min_length: { type: 'integer', minimum: 1, default: 1 },
      },
      required: ['text'],
      additionalProperties: false,
    },
  });
  assert.equal(toolDef(counter), def, 'computed once');
  assert.equal(bindTool(counter, toolContext(scope)).def, def);
  assert.equal(bindTool(counter, toolContext(scope)).label, 'count_words');
});

test('the registry refuses duplicate names, bad names, non-object schemas and unknown names to bind', () => {
  assert.deepEqual(registry.names(), ['count_words', 'explode', 'huge']);
  assert.throws(() => new ToolRegistry([counter, counter]), /tool count_words is registered twice/);
  const badName = defineTool({ ...failing, name: 'mcp:server/tool' });
  assert.throws(() => new ToolRegistry([badName]), /tool name "mcp:server\/tool" is not a valid API name/);
  const notObject = defineTool({ name: 'scalar', description: 'd', input: z.string(), run: async (s) => s });
  assert.throws(() => new ToolRegistry([notObject]), /tool scalar: the input schema must be an object/);
  assert.throws(() => registry.bind(['count_words', 'spawn_agent'], toolContext(scope)), /unknown tool "spawn_agent"/);
  const bound = registry.bind(['huge', 'count_words'], toolContext(scope));
  assert.deepEqual(
    bound.map((t) => t.def.name),
    ['huge', 'count_words'],
    'in the order named',
  );
});

test(
  'through the agent loop: bad input, an unknown tool, a throw and a huge result are is_error or cut; ' +
    'the run goes on',
  async () => {
    const metrics = new Metrics();
    const { logger } = captureLogger();
    const ac = new AbortController();
    const tools = registry.bind(registry.names(), toolContext(scope, { signal: ac.signal, log: logger }));
    const calls: ToolCallRecord[] = [];
    server.setHandler((body) =>
      body.messages.length === 1
        ? {
            content: [
              { type: 'tool_use', id: 'toolu_ok', name: 'count_words', input: { text: 'one two three' } },
              { type: 'tool_use', id: 'toolu_missing', name: 'count_words', input: {} },
              { type: 'tool_use', id: 'toolu_type', name: 'count_words', input: { text: 'a', min_length: 'two' } },
              { type: 'tool_use', id: 'toolu_range', name: 'count_words', input: { text: 'a', min_length: 0 } },
              { type: 'tool_use', id: 'toolu_extra', name: 'count_words', input: { text: 'a', goalId: 'other' } },
              { type: 'tool_use', id: 'toolu_null', name: 'count_words', input: null },
              { type: 'tool_use', id: 'toolu_unknown', name: 'rm -rf / #invented-name', input: { x: 1 } },
              { type: 'tool_use', id: 'toolu_throw', name: 'explode', input: {} },
              { type: 'tool_use', id: 'toolu_huge', name: 'huge', input: { n: 60_000 } },
            ],
            stop_reason: 'tool_use',
          }
        : text('done'),
    );
    const agent = createAgent(spec(), { provider: rt.provider, logger, models: rt.cfg.models, metrics });
    const from = server.requests.length;
    const run = await agent.run({
      task: 'Use the tools',
      tools,
      contract: textContract,
      ctx: ctxFor('tool-role'),
      onToolCall: (c) => void calls.push(c),
    });
    assert.equal(run.ok, true, run.problem);
    assert.equal(run.text, 'done');
    const reqs = server.requests.slice(from);
    assert.equal(reqs.length, 2);
    assert.deepEqual(
      reqs[0]!.body.tools!.map((t) => t.name),
      ['count_words', 'explode', 'huge'],
    );
    const r = results(reqs[1]!.body.messages[2]);
    assert.equal(r.size, 9, 'every tool_use gets its tool_result');
    const err = (id: string, re: RegExp) => {
      assert.equal(r.get(id)!.is_error, true, `${id} is an error result`);
      assert.match(String(r.get(id)!.content), re, id);
    };
    assert.equal(r.get('toolu_ok')!.content, '3');
    assert.equal(r.get('toolu_ok')!.is_error, undefined);
    err(
      'toolu_missing',
      /^error: bad arguments for count_words: text: Invalid input: expected string, received undefined$/,
    );
    err('toolu_type', /^error: bad arguments for count_words: min_length: Invalid input: expected number/);
    err('toolu_range', /^error: bad arguments for count_words: min_length: min_length must be 1 or more$/);
    err('toolu_extra', /^error: bad arguments for count_words: \(root\): Unrecognized key: "goalId"$/);
    err('toolu_null', /^error: bad arguments for count_words: text: /);
    err('toolu_unknown', /^error: unknown tool "rm -rf \/ #invented-name" \(available: count_words, explode, huge\)$/);
    err('toolu_throw', /^error: the disk is on fire$/);
    const big = String(r.get('toolu_huge')!.content);
    assert.equal(big, 'x'.repeat(50_000) + TRUNCATION_MARKER, 'cut at 50,000 chars with the marker');
    assert.equal(r.get('toolu_huge')!.is_error, undefined);

    // run(input, ctx): the validated input, and the job's scope, signal and logger.
    assert.equal(seen.length, 1, 'run is called only with valid input');
    assert.deepEqual(
      { ...seen[0]!, signal: undefined, log: undefined },
      { ...scope, signal: undefined, log: undefined },
    );
    assert.equal(seen[0]!.signal, ac.signal);
    assert.equal(seen[0]!.log, logger);

    // One record per call, in order; an invented name is `unknown`.
    assert.deepEqual(
      calls.map((c) => [c.tool, c.ok]),
      [
        ['count_words', true],
        ['count_words', false],
        ['count_words', false],
        ['count_words', false],
        ['count_words', false],
        ['count_words', false],
        ['unknown', false],
        ['explode', false],
        ['huge', true],
      ],
    );
    assert.ok(calls.every((c) => Number.isInteger(c.ms) && c.ms >= 0));

    const scrape = await metrics.registry.metrics();
    assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="count_words",status="ok"\} 1$/m);
    assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="count_words",status="error"\} 5$/m);
    assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="unknown",status="error"\} 1$/m);
    assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="explode",status="error"\} 1$/m);
    assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="huge",status="ok"\} 1$/m);
    assert.match(scrape, /^deepq_tool_latency_seconds_count\{role="tool-role",tool="count_words"\} 6$/m);
    assert.match(scrape, /^deepq_tool_latency_seconds_bucket\{le="\+Inf",role="tool-role",tool="huge"\} 1$/m);
    assert.doesNotMatch(scrape, /invented-name|rm -rf/, 'model-chosen text never becomes a label');
    assert.doesNotMatch(scrape, /deepq_tool_latency_seconds_count\{role="tool-role",tool="unknown"\}/);
  },
);

test('a bound tool refuses to run once its job is aborted; the error is a result, not a crash', async () => {
  const ac = new AbortController();
  const [tool] = registry.bind(['count_words'], toolContext(scope, { signal: ac.signal })) as [Tool];
  assert.equal(await tool.run({ text: 'a b' }), '2');
  ac.abort();
  await assert.rejects(tool.run({ text: 'a b' }), /count_words not run: the job was aborted/);
  // Validation comes first: a bad input names the field even then.
  await assert.rejects(tool.run({}), /bad arguments for count_words: text/);
});

test('a Tool label is the metric label; the def name is what the model calls', async () => {
  const metrics = new Metrics();
  const labelled: Tool = {
    def: { name: 'srv__search', description: 'd', input_schema: { type: 'object', properties: {} } },
    label: 'mcp:srv/search',
    run: async () => 'found',
  };
  server.setHandler((body) => (body.messages.length === 1 ? toolUse('srv__search', {}) : text('ok')));
  const agent = createAgent(spec(), { provider: rt.provider, logger: rt.logger, models: rt.cfg.models, metrics });
  const run = await agent.run({ task: 't', tools: [labelled], contract: textContract, ctx: ctxFor('tool-role') });
  assert.equal(run.ok, true);
  const scrape = await metrics.registry.metrics();
  assert.match(scrape, /^deepq_tool_calls_total\{role="tool-role",tool="mcp:srv\/search",status="ok"\} 1$/m);
  assert.doesNotMatch(scrape, /tool="srv__search"/);
});
