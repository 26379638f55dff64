// Budgets within a cycle, across real processes with the real SDK against the local
// Messages-API server: a plan's per-subtask token cap stops a subagent partial (told to finish
// first), a goal at its --max-tokens (or --max-steps, --max-seconds) with --on-budget pause
// waits with its work kept and carries on (its parked subagent from its saved messages) once
// resumed with more, and the reservation before each call bounds the overshoot to one call
// per running subagent.
// Every call's max output is 512 tokens here (roles, planner and reflector), so a call's worth
// is small next to the budgets.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DEFAULT_ROLES } from '../../shared/agent/roles.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import {
  estimateUsage,
  firstUserText,
  type MessageReply,
  type MessagesApiServer,
  roleOf,
  startMessagesApiServer,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { until } from '../../testing/until.ts';
import { cycleOf, json, metricSum, requestsOf, research, scenarioHandler } from './harness.ts';

const MAX_OUT = 512;
const CAP = '[cap]';
const PAUSE = '[pause]';
const STEPS = '[steps]';
const TIME = '[time]';
const TIME_TURNS = 10;
const TIME_TURN_MS = 300;
const OVERSHOOT = '[overshoot';
const LATE = '[late]';
const TINY = '[tinycap]';
/** Holds the first reflection of the LATE scenario until the test lets it answer. */
let releaseReflection: () => void = () => {};
const reflectionHeld = new Promise<void>((r) => {
  releaseReflection = r;
});
const REJECTED = '[rejected]';
/** Holds the planner's (or reflector's) corrected answer in the REJECTED scenario until the test lets it go. */
const held = { planner: gate(), reflector: gate() };
/** Fresh runs (first call of a conversation) of each role in the REJECTED scenarios. */
const freshRuns = { planner: 0, reflector: 0 };
const RESEARCH_QUEUE = 'subagent-research-specialist';
const SLOW_TURNS = 8;

/** Usage as the test decides it, not the server's estimate: every call of the scenario costs 900. */
const fixed = (reply: MessageReply): MessageReply => ({
  ...reply,
  usage: { input_tokens: 800, output_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
});

/**
 * A tokenizer that counts more than deepq's chars/4 estimate, and by a different factor for
 * different requests (`factor`), and a model that always uses every output token it may: the
 * hard case for the reservation, whose estimate learns only from the goal's last call.
 */
const worstCase = (body: Parameters<typeof estimateUsage>[0], reply: MessageReply, factor: number): MessageReply => {
  const est = estimateUsage(body, reply.content, new Set());
  const input = est.input_tokens + est.cache_read_input_tokens + est.cache_creation_input_tokens;
  const usage = { cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
  return { ...reply, usage: { ...usage, input_tokens: Math.ceil(factor * input), output_tokens: body.max_tokens } };
};

const turnOf = (body: { messages: unknown[] }) => (body.messages.length + 1) / 2;

const handler = scenarioHandler({
  // One research subtask capped at 2000 tokens; the model keeps looking at files, never answering.
  [CAP]: (body, role) => {
    if (role === 'planner') return json({ subtasks: [research(CAP, 'capped.md', { token_cap: 2000 })] });
    if (role === 'reflector') return json({ decision: 'end', reason: 'ok' });
    return fixed(toolUse('list_files', {}, { text: `Draft ${turnOf(body)}: what I found so far` }));
  },
  // The first plan caps its subtask below what one call needs; told so, the planner gives more.
  [TINY]: (body, role) => {
    const cap = body.messages.length === 1 ? 300 : 3000;
    if (role === 'planner') return json({ subtasks: [research(TINY, 'tiny.md', { token_cap: cap })] });
    if (role === 'reflector') return json({ decision: 'end', reason: 'ok' });
    return text('the tiny answer');
  },
  // Cycle 1: quick.md answers at once, slow.md looks at the files 7 times first; cycle 2: more.md.
  // Usage is the server's chars/4 count, like deepq's own estimate.
  [PAUSE]: (body, role, task) => {
    if (role === 'planner') {
      const names = cycleOf(task) === 1 ? ['quick.md', 'slow.md'] : ['more.md'];
      return json({ subtasks: names.map((n) => research(PAUSE, n)) });
    }
    if (role === 'reflector') return json({ decision: cycleOf(task) === 1 ? 'continue' : 'end', reason: 'next' });
    if (task.includes('write slow.md') && turnOf(body) < SLOW_TURNS) return toolUse('list_files', {});
    return text(`answer for ${/write (\S+)/.exec(task)?.[1]}`);
  },
  // One subtask whose 10 turns take 300 ms each: a 2-second budget runs out in the middle.
  [TIME]: async (body, role) => {
    if (role === 'planner') return json({ subtasks: [research(TIME, 'timed.md')] });
    if (role === 'reflector') return json({ decision: 'end', reason: 'ok' });
    await new Promise((r) => setTimeout(r, TIME_TURN_MS));
    if (turnOf(body) < TIME_TURNS) return toolUse('list_files', {});
    return text('answer for timed.md');
  },
  // One quick subtask; the first reflection is held until the time budget has paused the goal.
  [LATE]: async (_body, role) => {
    if (role === 'planner') return json({ subtasks: [research(LATE, 'late.md')] });
    if (role !== 'reflector') return text('answer for late.md');
    await reflectionHeld;
    return json({ decision: 'end', reason: 'ok' });
  },
  // The role's first run answers what breaks its contract, twice: the correction asked for is held
  // until the test lets it answer (after the deadline paused the goal); the run after the resume
  // answers well. `[rejected-planner]` or `[rejected-reflector]`.
  [REJECTED]: async (body, role, task) => {
    if (role !== 'planner' && role !== 'reflector') return text('answer for rejected.md');
    if (!task.includes(`[rejected-${role}]`)) return answer(role);
    if (body.messages.length === 1 && ++freshRuns[role] === 2) return answer(role);
    if (body.messages.length > 1) await held[role].promise;
    return json({ nonsense: true });
  },
  // Five subtasks in parallel, each looking at the files forever: only the budget stops them.
  // Two cycles of one quick subtask each.
  [STEPS]: (_body, role, task) => {
    if (role === 'planner') return json({ subtasks: [research(STEPS, cycleOf(task) === 1 ? 'one.md' : 'two.md')] });
    if (role === 'reflector') return json({ decision: cycleOf(task) === 1 ? 'continue' : 'end', reason: 'next' });
    return text(`answer for ${/write (\S+)/.exec(task)?.[1]}`);
  },
  // The planner's input counts 1.2× the estimate, each subagent's 1.4× to 1.8× (by its number).
  [OVERSHOOT]: async (body, role, task) => {
    const tag = /\[overshoot-\d+\]/.exec(task)?.[0] ?? OVERSHOOT;
    if (role === 'planner') {
      const names = [1, 2, 3, 4, 5].map((i) => `loop-${i}.md`);
      return worstCase(body, json({ subtasks: names.map((n) => research(tag, n)) }), 1.2);
    }
    if (role === 'reflector') return worstCase(body, json({ decision: 'end', reason: 'ok' }), 1.2);
    await new Promise((r) => setTimeout(r, 40)); // the five calls overlap
    const n = Number(/loop-(\d)/.exec(task)?.[1] ?? 1);
    return worstCase(body, toolUse('list_files', {}, { text: 'still looking' }), 1.3 + n / 10);
  },
});

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler });
  const dir = tempDir('deepq-cycles-');
  const config = join(dir, 'deepq.json');
  const roles = DEFAULT_ROLES.map((r) => ({ ...r, maxTokens: MAX_OUT }));
  writeFileSync(config, JSON.stringify({ roles, planner: { maxTokens: MAX_OUT }, reflector: { maxTokens: MAX_OUT } }));
  fleet = await startFleet(redis.url, anthropicEnv(server, { DEEPQ_CONFIG: config }), {
    roles: ['research-specialist'],
  });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

test('a subtask over its token cap is told to finish, then stops: partial, with what it had', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${CAP} Look around` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  const finished = (await fleet.client.goals.events(goalId))
    .map((e) => e.event)
    .find((e) => e.type === 'subtask_finished');
  assert.ok(finished?.type === 'subtask_finished' && finished.partial, 'the subtask finished partial');
  assert.match(finished.reason ?? '', /^stopped at its token cap \(\d+ of 2000 tokens\): partial$/);

  const calls = requestsOf(server, CAP, 'research');
  const notice = calls.findIndex((r) => JSON.stringify(r.body.messages).includes('[deepq: this task has used'));
  assert.ok(notice > 0 && notice < calls.length, 'the model was told to finish before the last call');
  const last = turnOf(calls[calls.length - 1]!.body);
  const file = (await fleet.client.vfs.index(goalId)).find((f) => f.name === 'capped.md');
  assert.equal(file?.status, 'active', 'a partial artifact is not done');
  assert.equal(await fleet.client.read(goalId, 'capped.md'), `Draft ${last}: what I found so far`);
  const used = Object.entries(g.usage)
    .filter(([k]) => k.startsWith('research-specialist|'))
    .reduce((n, [, u]) => n + u.input + u.output + u.cache_read + u.cache_write, 0);
  assert.ok(used <= 2000, `the subtask used ${used} tokens of its 2000 cap`);
  assert.equal(used, calls.length * 900);
  const reflector = requestsOf(server, CAP, 'reflector')[0]!.body.messages[0]!.content as string;
  assert.match(reflector, /^- capped\.md \(research-specialist\): partial: stopped at its token cap/m);
});

test('a token_cap below what one call needs is refused with the minimum, not run to a 0-token partial', async () => {
  const goalId = await fleet.client.enqueue({ goal: `${TINY} Small` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  const planner = requestsOf(server, TINY, 'planner');
  assert.equal(planner.length, 2, 'the first plan was refused');
  const reminder = JSON.stringify(planner[1]!.body.messages.at(-1));
  assert.match(reminder, /token_cap 300 is below the ~\d+ tokens one call of research-specialist needs/);
  assert.equal(await fleet.client.read(goalId, 'tiny.md'), 'the tiny answer');
});

test('--on-budget pause: at --max-tokens the goal waits, work kept; resumed with more, it finishes done', async () => {
  const enq = await runCli(
    ['enqueue', `${PAUSE} Two parts`, '--max-tokens', '6000', '--on-budget', 'pause'],
    fleet.env,
  );
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  let g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.deepEqual([g.pausedFor, g.pausedFrom], ['budget', 'running']);
  assert.match(g.reason!, /^token budget exceeded: \d+ tokens used.*, too few left for another call \(max 6000\)$/);
  const used = Object.values(g.tokens).reduce((a, b) => a + b, 0);
  const quick = (await fleet.client.vfs.index(goalId)).find((f) => f.name === 'quick.md')!;
  assert.equal(quick.status, 'done');
  // Its parked job and saved messages last as long as the goal may wait, past the keys' TTL.
  const keys = fleet.client.goals.keys;
  const ttls = async () => Promise.all([keys.parked(goalId), keys.checkpoints(goalId)].map((k) => redis.client.ttl(k)));
  const waitFloor = fleet.cfg.awaitingRetentionSeconds;
  assert.ok(waitFloor > fleet.cfg.goalKeyTtlSeconds, 'the defaults let a goal wait longer than its keys live');
  const [parkedTtl, checkpointTtl] = await until(async () => {
    const t = await ttls();
    return t.every((s) => s > 0) ? t : undefined;
  }, 10_000);
  assert.ok(parkedTtl! >= waitFloor && checkpointTtl! >= waitFloor, `TTLs ${parkedTtl}, ${checkpointTtl} s`);
  // slow.md stopped in the middle of its tool loop.
  const before = requestsOf(server, 'write slow.md', 'research').length;
  assert.ok(before >= 2 && before < SLOW_TURNS, `slow.md made ${before} calls before the pause`);
  const status = await runCli(['status', goalId], fleet.env);
  assert.match(status.stdout, new RegExp(`^budgets {3}tokens ${used} of 6000; at a limit: pause$`, 'm'));
  const carryOn = `^paused {4}at its budget, work kept: carry on with deepq resume ${goalId} --max-tokens N$`;
  assert.match(status.stdout, new RegExp(carryOn, 'm'));
  assert.equal(await metricSum(fleet, 'deepq_budget_events_total', { kind: 'tokens', action: 'pause' }), 1);

  // Resuming without more budget, or with less than is used, is refused, naming why.
  let r = await runCli(['resume', goalId], fleet.env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /paused at its budget .*: resume it with a higher --max-tokens/);
  r = await runCli(['resume', goalId, '--max-tokens', '40000', '--note', 'focus'], fleet.env);
  assert.equal(r.code, 1, 'a note no planner would read was taken');
  assert.match(r.stderr, /paused at its budget and carries on from where it stopped: a --note is for a review/);
  const given = join(tempDir('deepq-budget-'), 'more.md');
  writeFileSync(given, 'more\n');
  r = await runCli(['resume', goalId, '--max-tokens', '40000', '--file', given], fleet.env);
  assert.equal(r.code, 1, 'files no planner would read were taken');
  assert.match(r.stderr, /carries on from where it stopped: a --file is for a review or an escalation/);
  assert.ok(!(await fleet.client.artifacts(goalId)).some((f) => f.name === 'more.md'), 'a refused file was stored');
  r = await runCli(['resume', goalId, '--max-tokens', '100'], fleet.env);
  assert.match(r.stderr, new RegExp(`--max-tokens 100 is not above the ${used} tokens the goal has used`));
  r = await runCli(['resume', goalId, '--max-tokens', '6000'], fleet.env);
  assert.equal(r.code, 1, 'a "raise" to the same budget was taken (the goal would pause again at once)');
  assert.match(r.stderr, /--max-tokens 6000 is not above the goal's token budget \(6000\) it paused at/);
  // Under its limit (too few left for another call), it is still the token budget that ran out.
  assert.equal(g.pausedBudget, 'tokens');
  r = await runCli(['resume', goalId, '--max-steps', '9'], fleet.env);
  assert.equal(r.code, 1, 'a resume raising another budget was taken');
  assert.match(r.stderr, /paused at its token budget \(token budget exceeded.*\): raise it with --max-tokens/);
  r = await runCli(['resume', goalId, '--max-tokens', '40000'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /raise budget \(status running\)/);

  g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(g.budgets.maxTokens, 40_000);
  const files = Object.fromEntries((await fleet.client.vfs.index(goalId)).map((f) => [f.name, f]));
  assert.deepEqual(Object.keys(files).sort(), ['more.md', 'quick.md', 'slow.md']);
  assert.deepEqual(files['quick.md'], quick, 'the work done before the pause is intact');
  assert.equal(await fleet.client.read(goalId, 'quick.md'), 'answer for quick.md');
  // The parked subtask went on from its saved messages: one start, every turn asked once.
  const slow = requestsOf(server, 'write slow.md', 'research').map((q) => turnOf(q.body));
  assert.deepEqual(slow, [1, 2, 3, 4, 5, 6, 7, 8]);
  const starts = (await fleet.client.goals.events(goalId))
    .map((e) => e.event)
    .filter((e) => e.type === 'subtask_started' && e.artifact === 'slow.md');
  assert.equal(starts.length, 1);
  assert.ok((await metricSum(fleet, 'deepq_goal_cycles_count', { status: 'done' })) >= 1);
});

test('--on-budget pause at --max-steps: the plan job waits; resumed with more steps, the next cycle runs', async () => {
  const goalId = await fleet.client.enqueue({
    goal: `${STEPS} Two cycles`,
    budgets: { maxSteps: 1, onBudget: 'pause' },
  });
  let g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.deepEqual([g.pausedFor, g.pausedFrom, g.step], ['budget', 'planning', 1]);
  assert.match(g.reason!, /^step budget exceeded: step 2 would pass the limit of 1$/);
  assert.equal(requestsOf(server, STEPS, 'planner').length, 1, 'cycle 2 was not planned');
  const r = await runCli(['resume', goalId, '--max-steps', '2'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /raise budget \(status planning\)/);
  g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.deepEqual(
    (await fleet.client.vfs.index(goalId)).map((f) => [f.name, f.status, f.version]),
    [
      ['one.md', 'done', 1],
      ['two.md', 'done', 1],
    ],
  );
  assert.equal(await metricSum(fleet, 'deepq_budget_events_total', { kind: 'steps', action: 'pause' }), 1);
  // The pause stopped cycle 2 before it was planned: its resume is numbered the same.
  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  const steps = (type: string) => events.filter((e) => e.type === type).map((e) => ('step' in e ? e.step : -1));
  assert.deepEqual([steps('paused'), steps('resumed')], [[2], [2]]);
});

test('--on-budget pause at --max-seconds: the deadline pauses a goal mid-loop; resumed with more time, it goes on', {
  timeout: 90_000,
}, async () => {
  const enq = await runCli(['enqueue', `${TIME} Timed`, '--max-seconds', '2', '--on-budget', 'pause'], fleet.env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  let g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human');
  assert.deepEqual([g.pausedFor, g.pausedFrom], ['budget', 'running']);
  assert.match(g.reason!, /^time budget exceeded: [\d.]+ s elapsed \(max 2 s\)$/);
  const shown = await runCli(['status', goalId, '--json'], fleet.env);
  const { status, pausedFor, reason } = JSON.parse(shown.stdout);
  assert.deepEqual([status, pausedFor, reason], ['awaiting_human', 'budget', g.reason]);
  assert.equal(await metricSum(fleet, 'deepq_budget_events_total', { kind: 'seconds', action: 'pause' }), 1);
  // The running call finishes; the job parks at its next one.
  const queue = fleet.client.queues.get(RESEARCH_QUEUE);
  for (let i = 0; i < 50 && (await queue.getJobCounts('active')).active > 0; i++) await sleep(100);
  const before = requestsOf(server, TIME, 'research').length;
  assert.ok(before >= 2 && before < TIME_TURNS, `timed.md made ${before} calls before the pause`);
  await sleep(2 * TIME_TURN_MS);
  assert.equal(requestsOf(server, TIME, 'research').length, before, 'the subtask went on while paused');

  const r = await runCli(['resume', goalId, '--max-seconds', '60'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /raise budget \(status running\)/);
  g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await fleet.client.read(goalId, 'timed.md'), 'answer for timed.md');
  // From its saved messages: every turn asked once, one start.
  const turns = requestsOf(server, TIME, 'research').map((q) => turnOf(q.body));
  assert.deepEqual(
    turns,
    Array.from({ length: TIME_TURNS }, (_, i) => i + 1),
  );
  const starts = (await fleet.client.goals.events(goalId))
    .map((e) => e.event)
    .filter((e) => e.type === 'subtask_started');
  assert.equal(starts.length, 1);
});

test("--on-budget pause during the reflector's call: the reflection waits with the goal, goes on when resumed", {
  timeout: 90_000,
}, async () => {
  const ends = () => metricSum(fleet, 'deepq_reflection_decisions_total', { decision: 'end' });
  const endsBefore = await ends();
  const enq = await runCli(['enqueue', `${LATE} Late`, '--max-seconds', '3', '--on-budget', 'pause'], fleet.env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  // Received, held (not answered yet: messageRequests lists it only once answered).
  const asked = () => server.requests.filter((q) => q.body?.system && firstUserText(q.body).includes(`${LATE} Late`));
  await until(async () => asked().some((q) => roleOf(q.body) === 'reflector') || undefined, 30_000);
  let g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.deepEqual([g.status, g.pausedFor, g.pausedFrom], ['awaiting_human', 'budget', 'reflecting']);
  // The reflector's decision comes after the pause: its move is refused, its job must wait.
  releaseReflection();
  const parked = fleet.client.goals.keys.parked(goalId);
  await until(async () => (await redis.client.hlen(parked)) === 1 || undefined, 10_000);
  const r = await runCli(['resume', goalId, '--max-seconds', '120'], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /raise budget \(status reflecting\)/);
  g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(requestsOf(server, LATE, 'reflector').length, 2, 'reflected again after the resume');
  assert.equal((await ends()) - endsBefore, 1, 'one decision applied, counted once');
});

for (const role of ['planner', 'reflector'] as const) {
  test(`--on-budget pause while the ${role}'s output is rejected: its job waits with the goal, runs again`, {
    timeout: 90_000,
  }, async () => {
    const goalText = `${REJECTED} [rejected-${role}] Rejected`;
    const enq = await runCli(['enqueue', goalText, '--max-seconds', '3', '--on-budget', 'pause'], fleet.env);
    assert.equal(enq.code, 0, enq.stderr);
    const goalId = enq.stdout.trim();
    const corrections = () => server.requests.filter((q) => roleOf(q.body) === role && q.body.messages.length > 1);
    await until(async () => corrections().some((q) => firstUserText(q.body).includes(goalText)) || undefined, 30_000);
    let g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
    assert.deepEqual([g.status, g.pausedFrom], ['awaiting_human', role === 'planner' ? 'planning' : 'reflecting']);
    // Rejected twice after the pause: the goal is not failed, the job parks with it.
    held[role].resolve();
    const parked = fleet.client.goals.keys.parked(goalId);
    await until(async () => (await redis.client.hlen(parked)) === 1 || undefined, 10_000);
    assert.equal((await fleet.client.get(goalId)).status, 'awaiting_human');
    const r = await runCli(['resume', goalId, '--max-seconds', '120'], fleet.env);
    assert.equal(r.code, 0, r.stderr);
    g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
    assert.equal(g.status, 'done', g.reason ?? '');
    assert.equal(freshRuns[role], 2, `the ${role} ran again after the resume`);
    const lengths = requestsOf(server, goalText, role).map((q) => q.body.messages.length);
    assert.deepEqual(lengths, [1, 3, 1], 'asked, corrected, asked again after the resume');
  });
}

/** Runs the five-subagent loop at a budget; returns its overshoot and how many subagents ran. */
async function overshootAt(budget: number): Promise<{ overshoot: number; running: number; calls: number }> {
  const tag = `${OVERSHOOT}-${budget}]`;
  const goalId = await fleet.client.enqueue({ goal: `${tag} Loop`, budgets: { maxTokens: budget } });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'budget_exceeded');
  // Calls in flight when the goal ended still land: wait for the subtasks to finish.
  const queue = fleet.client.queues.get(RESEARCH_QUEUE);
  for (let i = 0; i < 100 && (await queue.getJobCounts('active')).active > 0; i++) await sleep(100);
  await sleep(200);
  const used = Object.values((await fleet.client.get(goalId)).tokens).reduce((a, b) => a + b, 0);
  const calls = requestsOf(server, tag, 'research').map((r) => /write (loop-\d\.md)/.exec(firstUserText(r.body))?.[1]);
  return { overshoot: Math.max(0, used - budget), running: new Set(calls).size, calls: calls.length };
}

/** A REJECTED role's answer that keeps its contract. */
function answer(role: 'planner' | 'reflector'): MessageReply {
  if (role === 'planner') return json({ subtasks: [research(REJECTED, 'rejected.md')] });
  return json({ decision: 'end', reason: 'ok' });
}

function gate(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('overshoot past --max-tokens is at most one call per running subagent', async () => {
  const figures: string[] = [];
  let worst = 0;
  // Budgets from "not all five fit one call" to "several calls each": the crossing falls
  // on different calls in flight.
  for (const budget of [5000, 6500, 8000, 9500, 11_000, 12_500]) {
    const { overshoot, running, calls } = await overshootAt(budget);
    assert.ok(running >= 1, 'the subagents ran');
    const perSubagent = overshoot / running;
    worst = Math.max(worst, perSubagent);
    figures.push(`${budget}: +${overshoot} (${running} running, ${calls} calls)`);
    assert.ok(perSubagent <= MAX_OUT, `budget ${budget}: overshoot ${overshoot} over ${running} subagents`);
  }
  console.log(`# measured overshoot by budget: ${figures.join('; ')}`);
  console.log(`# measured: worst overshoot ${worst.toFixed(0)} tokens per running subagent (bound: ${MAX_OUT})`);
});
