// Any model, per role: a whole goal through real planner, reflector and worker processes
// where the critic runs on an OpenAI-compatible endpoint (the real `openai` SDK against a
// local Chat Completions server) and every other agent on Anthropic (the real SDK against a
// local Messages-API server). Both endpoints answer with ids other than the ones asked for
// (Anthropic a dated id, the local server its own name), as real ones do.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { findPrice, type Price, priceUsage } from '../../shared/agent/providers/prices.ts';
import { TOKEN_KINDS, type Usage } from '../../shared/goal/store.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import {
  type ChatCompletionsServer,
  type ChatRecordedRequest,
  chatError,
  chatSystemText,
  defaultChatHandler,
  FAKE_OPENAI_KEY,
  linkChatThreads,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import {
  defaultHandler,
  type MessageReply,
  type MessagesApiServer,
  type RecordedRequest,
  roleOf,
  startMessagesApiServer,
  type WireUsage,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { modelLabels, rolesWithModels, sample, scrape, writeConfig } from './harness.ts';

const redis = useRedis();
let anthropic: MessagesApiServer;
let local: ChatCompletionsServer;
let fleet: Fleet;

/** What the local server calls the model it serves (not what deepq asked for). */
const SERVED_AS = 'critic-model-q4_K_M';
const price = (i: number, o: number, r: number, w: number): Price => ({
  inputPerMTok: i,
  outputPerMTok: o,
  cacheReadPerMTok: r,
  cacheWritePerMTok: w,
});
// Large prices, so that each model's share shows in the 4 decimals `deepq status` prints.
const PRICES = {
  'test-model-high': price(300, 1500, 30, 375),
  'test-model-low': price(100, 500, 10, 125),
  'local:critic-model': price(1000, 2000, 100, 0),
};
/** Faults the local server serves before answering (each consumed by one critic request). */
const faults: ReturnType<typeof chatError>[] = [];
let criticTurns = 0;
/** Set: the local server reports no usage, as some servers do. */
let withoutUsage = false;

before(async () => {
  await redis.ready;
  anthropic = await startMessagesApiServer({
    handler: async (body, i, rec) => {
      const reply = await defaultHandler(body, i, rec);
      return 'content' in (reply as MessageReply)
        ? { ...(reply as MessageReply), model: `${body.model}-20250929` }
        : reply;
    },
  });
  local = await startChatCompletionsServer({
    handler: async (body, i, rec) => {
      const fault = faults.shift();
      if (fault) return fault;
      const reply = await defaultChatHandler(body, i, rec);
      if (typeof reply !== 'object' || 'status' in reply) return reply;
      // From the second turn on, part of the prompt comes from the server's cache.
      const prompt = Math.ceil(JSON.stringify(body.messages).length / 4) + 50;
      const cached = criticTurns++ % 2 ? 32 : 0;
      const usage = withoutUsage ? null : { prompt_tokens: prompt, completion_tokens: 21, cached_tokens: cached };
      return { ...reply, model: SERVED_AS, usage };
    },
  });
  const config = writeConfig({
    providers: { local: local.providerConfig() },
    roles: rolesWithModels({ critic: 'local:critic-model' }),
    prices: PRICES,
  });
  fleet = await startFleet(redis.url, { ...anthropicEnv(anthropic), ...local.env(), DEEPQ_CONFIG: config });
});
after(async () => {
  await fleet?.stop();
  await local?.close();
  await anthropic?.close();
});

const ROLE_NAME: Record<string, string> = {
  planner: 'planner',
  reflector: 'reflector',
  research: 'research-specialist',
  code: 'code-writer',
};

async function until(ok: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function add(into: Record<string, Usage>, key: string, u: Usage): void {
  into[key] ??= { input: 0, output: 0, cache_read: 0, cache_write: 0 };
  for (const k of TOKEN_KINDS) into[key]![k] += u[k];
}

/** The usage each endpoint reported, as deepq must have booked it: `<role>|<model>` → tokens. */
function reportedUsage(anthropicReqs: RecordedRequest[], localReqs: ChatRecordedRequest[]): Record<string, Usage> {
  const out: Record<string, Usage> = {};
  for (const r of anthropicReqs) {
    const res = r.response!.body as { model: string; usage: WireUsage };
    const u = res.usage;
    add(out, `${ROLE_NAME[roleOf(r.body)]}|${res.model}`, {
      input: u.input_tokens,
      output: u.output_tokens,
      cache_read: u.cache_read_input_tokens,
      cache_write: u.cache_creation_input_tokens,
    });
  }
  for (const r of localReqs) {
    const res = r.response!.body as {
      model: string;
      usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    };
    const cached = res.usage.prompt_tokens_details.cached_tokens;
    const u = { input: res.usage.prompt_tokens - cached, output: res.usage.completion_tokens, cache_read: cached };
    add(out, `critic|local:${res.model}`, { ...u, cache_write: 0 });
  }
  return out;
}

test('the critic runs on the OpenAI provider, the rest on Anthropic; usage and cost per model are right', async () => {
  faults.push(chatError(500, 'the local server hiccuped'));
  const fromA = anthropic.requests.length;
  const fromL = local.requests.length;
  const goalId = await fleet.client.enqueue({ goal: 'Write a function that sorts numbers MIXEDGOAL' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', `${g.status}: ${g.reason}`);
  const aReqs = anthropic.requests.slice(fromA);
  const lReqs = local.requests.slice(fromL);

  // Who went where: only the critic on the local server, never the critic on Anthropic.
  const critic = fleet.cfg.roles.find((r) => r.name === 'critic')!;
  assert.ok(lReqs.length >= 3, `${lReqs.length} local requests`);
  for (const r of lReqs) {
    assert.equal(chatSystemText(r.body), critic.systemPrompt);
    assert.equal(r.body.model, 'critic-model', 'the bare id goes to the server');
    assert.equal(r.apiKey, FAKE_OPENAI_KEY);
  }
  assert.deepEqual([...new Set(aReqs.map((r) => roleOf(r.body)))].sort(), ['code', 'planner', 'reflector', 'research']);

  // The 500 was retried in the call, with the same request; then the tool loop ran.
  assert.equal(lReqs[0]!.response?.status, 500);
  assert.equal(lReqs[1]!.rawBody, lReqs[0]!.rawBody);
  const { threads, problems } = linkChatThreads(lReqs);
  assert.deepEqual(
    problems.map((p) => `#${p.req.index}: ${p.problem}`),
    [],
  );
  assert.equal(threads.length, 1, 'one critic conversation');
  const first = lReqs[0]!.body.messages;
  // P52 on this provider: the critic's prompt, then its task alone (the code it reviews, its instruction).
  const plan = g.plan?.subtasks ?? [];
  const instruction = plan.find((s) => s.role === 'critic')?.instruction;
  const code = await fleet.client.read(goalId, 'solution.py');
  assert.deepEqual(first, [
    { role: 'system', content: critic.systemPrompt },
    { role: 'user', content: `# solution.py\n${code}\n\n## Task\n${instruction}` },
  ]);
  const tool = lReqs[2]!.body.messages[3];
  assert.equal(tool?.role, 'tool', 'the read_file result went back as a tool message');
  assert.equal(tool?.content, code, 'with the file it read');

  // Booked per role and model as the endpoints reported it, with the id each was asked as.
  const completions = lReqs.filter((r) => r.response?.kind === 'completion');
  const expected = reportedUsage(aReqs, completions);
  assert.deepEqual(g.usage, expected);
  assert.deepEqual(g.requestedAs, {
    'test-model-high-20250929': 'test-model-high',
    'test-model-low-20250929': 'test-model-low',
    [`local:${SERVED_AS}`]: 'local:critic-model',
  });
  assert.ok(completions.some((r) => JSON.stringify(r.response?.body).includes('"cached_tokens":32')));
  await checkStatus(goalId, expected);
  await checkMetrics();
});

/** What `deepq status` prints per role and model, read back: `<role>|<model>` → tokens. */
function roleLines(stdout: string): Record<string, Usage> {
  const out: Record<string, Usage> = {};
  const re = /^ {2}(\S+) @ (\S+)\s+in (\d+) out (\d+) cache r\/w (\d+)\/(\d+)(?: \(estimated\))?$/gm;
  for (const [, role, model, i, o, r, w] of stdout.matchAll(re))
    add(out, `${role}|${model}`, { input: +i!, output: +o!, cache_read: +r!, cache_write: +w! });
  return out;
}

/**
 * The one column where `status` starts every role line's counts: 2 + 44, or past the longest
 * `role @ model` (this fleet's `research-specialist @ test-model-low-20250929` is 45 long).
 */
function usageColumn(stdout: string): number {
  const labels = [...stdout.matchAll(/^ {2}(\S+ @ \S+)(\s+)in \d/gm)];
  const starts = new Set(labels.map(([, label, gap]) => 2 + label!.length + gap!.length));
  assert.equal(starts.size, 1, `one column:\n${stdout}`);
  const longest = Math.max(...labels.map(([, label]) => label!.length));
  assert.equal([...starts][0], 2 + Math.max(44, longest + 1) + 1, stdout);
  return [...starts][0]!;
}

/** Its per-model cost lines: model → what follows its padded id (in the role lines' column). */
function modelCostLines(stdout: string): Record<string, string> {
  const re = /^ {2}([^\s@]+)\s+(~\$\d+\.\d{4}|price unknown)( \(estimated\))?$/gm;
  const column = usageColumn(stdout);
  return Object.fromEntries(
    [...stdout.matchAll(re)].map(([line, model, cost, est]) => {
      assert.ok(line.startsWith(`  ${model!.padEnd(column - 3)} `), `aligned: ${JSON.stringify(line)}`);
      return [model!, `${cost}${est ?? ''}`];
    }),
  );
}

interface ModelRow {
  model: string;
  tokens: Usage;
  costUsd: number | null;
  estimated: boolean;
}

/** The `status --json` rows the booked usage must give: tokens summed over roles, priced by `prices`. */
function modelRows(usage: Record<string, Usage>, prices: Record<string, Price>, estimated: string[] = []): ModelRow[] {
  const byModel: Record<string, Usage> = {};
  for (const [key, u] of Object.entries(usage)) add(byModel, key.split('|')[1]!, u);
  return Object.entries(byModel)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([model, tokens]) => {
      const alias = model.endsWith('-20250929') ? model.slice(0, -9) : 'local:critic-model';
      const price = prices[alias];
      const est = estimated.some((k) => k.endsWith(`|${model}`));
      return { model, tokens, costUsd: price ? priceUsage(price, tokens) : null, estimated: est };
    });
}

const shown = (r: ModelRow) =>
  `${r.costUsd === null ? 'price unknown' : `~$${r.costUsd.toFixed(4)}`}${r.estimated ? ' (estimated)' : ''}`;

/** `deepq status` (and --json) shows each model's tokens and cost with every model priced (by its alias). */
async function checkStatus(goalId: string, expected: Record<string, Usage>): Promise<void> {
  let usd = 0;
  for (const [key, u] of Object.entries(expected)) {
    const model = key.split('|')[1]!;
    const alias = model.endsWith('-20250929') ? model.slice(0, -9) : 'local:critic-model';
    const part = priceUsage(PRICES[alias as keyof typeof PRICES], u);
    assert.ok(part > 0.001, `${key} costs enough to show (${part})`);
    assert.equal(findPrice(PRICES, model, alias)?.by, 'alias');
    usd += part;
  }
  const [out, json] = await Promise.all([
    runCli(['status', goalId], fleet.env),
    runCli(['status', goalId, '--json'], fleet.env),
  ]);
  assert.equal(out.code, 0, out.stderr);
  const c = expected[`critic|local:${SERVED_AS}`]!;
  const line = `  critic @ local:${SERVED_AS}`.padEnd(usageColumn(out.stdout) - 1);
  assert.ok(out.stdout.includes(`${line} in ${c.input} out ${c.output} cache r/w ${c.cache_read}/0\n`), out.stdout);
  assert.match(out.stdout, new RegExp(`^cost\\s+~\\$${usd.toFixed(4).replace('.', '\\.')}$`, 'm'));
  // Every role's line (the Anthropic ones too) is what the endpoints reported; then one cost
  // line per model, its tokens over its roles priced by the alias it was asked as.
  assert.deepEqual(roleLines(out.stdout), expected);
  const rows = modelRows(roleLines(out.stdout), PRICES);
  assert.equal(rows.length, 3);
  assert.deepEqual(modelCostLines(out.stdout), Object.fromEntries(rows.map((r) => [r.model, shown(r)])));
  // --json: the same rows, and the total.
  const usage = JSON.parse(json.stdout).usage as { models: ModelRow[]; total: Record<string, unknown> };
  assert.deepEqual(usage.models, rows);
  const all: Record<string, Usage> = {};
  for (const u of Object.values(expected)) add(all, 'total', u);
  const { costUsd, ...total } = usage.total as { costUsd: number };
  assert.deepEqual(total, { tokens: all.total, unpricedModels: [] });
  assert.ok(Math.abs(costUsd - usd) < 1e-9, `total ${costUsd} vs ${usd}`);
  await checkUnpriced(goalId, rows);
}

/** The same goal under a price table without the critic's model: "price unknown" for it, never $0. */
async function checkUnpriced(goalId: string, priced: ModelRow[]): Promise<void> {
  const noCriticPrice = writeConfig({
    providers: { local: local.providerConfig() },
    prices: { 'test-model-high': PRICES['test-model-high'], 'test-model-low': PRICES['test-model-low'] },
  });
  const env = { ...fleet.env, DEEPQ_CONFIG: noCriticPrice };
  const [unknown, json, goalsJson, goals] = await Promise.all([
    runCli(['status', goalId], env),
    runCli(['status', goalId, '--json'], env),
    runCli(['goals', '--json'], env),
    runCli(['goals'], env),
  ]);
  assert.match(
    unknown.stdout,
    new RegExp(`^cost\\s+~\\$\\d+\\.\\d{4} \\+ price unknown \\(local:${SERVED_AS}\\)$`, 'm'),
  );
  const critic = `local:${SERVED_AS}`;
  const rows = priced.map((r) => (r.model === critic ? { ...r, costUsd: null } : r));
  assert.deepEqual(modelCostLines(unknown.stdout), Object.fromEntries(rows.map((r) => [r.model, shown(r)])));
  assert.equal(modelCostLines(unknown.stdout)[critic], 'price unknown');
  const usage = JSON.parse(json.stdout).usage as { models: ModelRow[]; total: Record<string, unknown> };
  assert.deepEqual(usage.models, rows);
  assert.equal(usage.total.costUsd, null);
  assert.deepEqual(usage.total.unpricedModels, [critic]);
  const list = JSON.parse(goalsJson.stdout) as Record<string, unknown>[];
  const row = list.find((r) => r.goalId === goalId)!;
  assert.equal(row.costUsd, null);
  assert.deepEqual(row.unpricedModels, [critic]);
  assert.match(goals.stdout, /\$\d+\.\d{4} \+ price unknown/);
}

/** Labels: configured models only; the local server's own id (configured nowhere) is `other`. */
async function checkMetrics(): Promise<void> {
  const worker = await scrape(fleet.ports.get('worker-critic'));
  const labels = { provider: 'local', model: 'local:critic-model', role: 'critic' };
  assert.ok(sample(worker, 'deepq_llm_requests_total', { ...labels, status: 'ok' }) >= 2);
  assert.equal(sample(worker, 'deepq_llm_requests_total', { ...labels, status: 'server' }), 1);
  assert.deepEqual(modelLabels(worker, 'deepq_llm_tokens_total'), ['other']);
  const planner = await scrape(fleet.ports.get('planner'));
  // A dated id is the configured model it was asked as.
  assert.deepEqual(modelLabels(planner, 'deepq_llm_tokens_total'), ['test-model-high']);
  assert.ok(sample(planner, 'deepq_llm_requests_total', { provider: 'anthropic', model: 'test-model-high' }) >= 1);
}

test("a 429 with retry-after from the critic's endpoint pauses the critic's queue in the fleet", async () => {
  faults.push(chatError(429, 'rate limited', { 'retry-after': '2' }));
  const from = local.requests.length;
  const goalId = await fleet.client.enqueue({ goal: 'Write a function that reverses a string LIMITED' });
  const critic = fleet.client.queues.get(subagentQueueName('critic'));
  const research = fleet.client.queues.get(subagentQueueName('research-specialist'));
  // Once the 429 is served, the worker pauses the critic's queue (a BullMQ rate limit), no other.
  await until(() => local.requests[from]?.response !== undefined, 60_000);
  const limitedAt = local.requests[from]!.receivedAt;
  assert.equal(local.requests[from]!.response?.status, 429);
  // A manual pause sets the limiter to MAX_SAFE_INTEGER; the limiter's own counting never gets there.
  const pausedFor = (q: typeof critic) => q.getRateLimitTtl(Number.MAX_SAFE_INTEGER);
  let ttl = 0;
  for (let i = 0; i < 50 && ttl <= 0; i++) {
    ttl = await pausedFor(critic);
    if (ttl <= 0) await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(ttl > 1000 && ttl <= 2000, `the critic queue is paused for retry-after (ttl ${ttl} ms)`);
  assert.equal(await pausedFor(research), 0, 'other roles are not paused');
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', `${g.status}: ${g.reason}`);
  const next = local.requests[from + 1]!;
  assert.ok(next.receivedAt - limitedAt >= 1900, `the critic called again after ${next.receivedAt - limitedAt} ms`);
  const job = await critic.getJob(`${goalId}:2:0`);
  assert.equal(await job!.getState(), 'completed');
  assert.ok(job!.attemptsMade <= 1, `the 429 used no attempt (${job!.attemptsMade})`);
  const worker = fleet.procs.find((p) => p.name === 'worker-critic')!;
  assert.match(worker.output(), /provider rate limit: pausing the queue/);
});

test('an endpoint that reports no usage: the critic’s tokens are estimated, booked and flagged', async () => {
  withoutUsage = true;
  try {
    const goalId = await fleet.client.enqueue({ goal: 'Write a function that counts words NOUSAGE' });
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.equal(g.status, 'done', `${g.status}: ${g.reason}`);
    const key = `critic|local:${SERVED_AS}`;
    assert.deepEqual(g.estimatedUsage, [key], 'only the endpoint without usage is flagged');
    assert.ok(g.usage[key]!.input > 100 && g.usage[key]!.output > 0, JSON.stringify(g.usage[key]));
    const [out, json] = await Promise.all([
      runCli(['status', goalId], fleet.env),
      runCli(['status', goalId, '--json'], fleet.env),
    ]);
    const line = `  critic @ local:${SERVED_AS}`.padEnd(usageColumn(out.stdout) - 1);
    assert.match(out.stdout, new RegExp(`^${line} in \\d+ out \\d+ cache r/w 0/0 \\(estimated\\)$`, 'm'));
    assert.match(out.stdout, /^ {2}planner @ test-model-high-20250929\s+in \d+ out \d+ cache r\/w \d+\/\d+$/m);
    // Its model's cost is flagged as estimated too, in the text and in --json; no other model's.
    const rows = modelRows(g.usage, PRICES, g.estimatedUsage);
    assert.deepEqual(
      rows.map((r) => r.estimated),
      [true, false, false],
    );
    assert.deepEqual(modelCostLines(out.stdout), Object.fromEntries(rows.map((r) => [r.model, shown(r)])));
    assert.match(modelCostLines(out.stdout)[`local:${SERVED_AS}`]!, /^~\$\d+\.\d{4} \(estimated\)$/);
    assert.deepEqual((JSON.parse(json.stdout).usage as { models: ModelRow[] }).models, rows);
    const worker = fleet.procs.find((p) => p.name === 'worker-critic')!;
    const warnings = worker.output().match(/reports no token usage/g) ?? [];
    assert.equal(warnings.length, 1, 'said once per provider, not per call');
  } finally {
    withoutUsage = false;
  }
});
