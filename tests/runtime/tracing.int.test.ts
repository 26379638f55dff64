// OpenTelemetry: with an OTLP endpoint set, a goal is one trace across every process that works
// on it (the CLI's enqueue, the planner, each subagent worker, the reflector, the next cycle's
// plan), exported by the real SDK over HTTP to a local OTLP receiver; model and tool calls are
// spans with their usage; BullMQ's idle chores make no traces; a bad endpoint stops a service.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { freePort } from '../../cli/private-redis.ts';
import {
  assertCliExit,
  type Fleet,
  runCli,
  startFleet,
  startProcess,
  stopProcess,
  waitForStart,
} from '../../testing/fleet.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../../testing/otlp-receiver.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let receiver: OtlpReceiver;
let fleet: Fleet;
let otel: NodeJS.ProcessEnv;
const goals: { id: string; tokens: number }[] = [];

const SERVICES = [
  'deepq-cli',
  'deepq-planner',
  'deepq-reflector',
  'deepq-worker-research-specialist',
  'deepq-worker-code-writer',
  'deepq-worker-critic',
];

/** The goal's trace: the spans sharing the trace id of its `deepq enqueue` root. */
function traceOf(goalId: string): { root: ReceivedSpan; spans: ReceivedSpan[] } {
  const root = receiver.spans.find((s) => s.name === 'deepq enqueue' && s.attributes['deepq.goal.id'] === goalId);
  assert.ok(root, `no deepq enqueue span for goal ${goalId}`);
  return { root, spans: receiver.spans.filter((s) => s.traceId === root.traceId) };
}

/**
 * Waits until the goal's trace holds the processing span of each of its 7 jobs. A process exports
 * its spans in the order they end, and a job's model and tool calls end before its processing: so
 * each process's part of the trace is then complete (the processes' exports race each other).
 */
async function traceComplete(goalId: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  const done = () =>
    receiver.spans.filter((s) => s.name.startsWith('process ') && s.attributes['deepq.goal.id'] === goalId).length >= 7;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`goal ${goalId}: its trace did not arrive in full`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  await redis.ready;
  receiver = await startOtlpReceiver();
  otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
  fleet = await startFleet(redis.url, otel);
  for (const goal of ['Traced goal one', 'Traced goal two']) {
    const r = await runCli(['enqueue', goal, '--wait', '--json'], fleet.env);
    await assertCliExit(r, 0, fleet);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    const tokens = out.usage.models.reduce(
      (n: number, m: { tokens: Record<string, number> }) => n + Object.values(m.tokens).reduce((a, b) => a + b, 0),
      0,
    );
    goals.push({ id: out.goalId, tokens });
  }
  for (const g of goals) await traceComplete(g.id);
});
after(async () => {
  await fleet?.stop();
  await receiver?.close();
});

test('a goal is one connected trace across the CLI and every service process', () => {
  const { root, spans } = traceOf(goals[0]!.id);
  assert.equal(root.service, 'deepq-cli');
  assert.equal(root.parentSpanId, undefined);
  assert.deepEqual([...new Set(spans.map((s) => s.service))].sort(), [...SERVICES].sort());
  const ids = new Set(spans.map((s) => s.spanId));
  const orphans = spans.filter((s) => s !== root && !(s.parentSpanId && ids.has(s.parentSpanId)));
  assert.deepEqual(
    orphans.map((s) => `${s.service} ${s.name}`),
    [],
    'every span but the root has its parent in the trace',
  );
  assert.deepEqual(receiver.rejected, []);
});

test("each job's processing span names its goal and step; the next cycle's plan hangs below the reflection", () => {
  const { id } = goals[0]!;
  const { spans } = traceOf(id);
  const processed = spans.filter((s) => s.name.startsWith('process '));
  const names = processed.map((s) => s.name).sort();
  assert.deepEqual(names, [
    'process plan',
    'process plan',
    'process reflect',
    'process reflect',
    'process subagent-code-writer',
    'process subagent-critic',
    'process subagent-research-specialist',
  ]);
  for (const s of processed) {
    assert.equal(s.attributes['deepq.goal.id'], id, s.name);
    assert.ok([1, 2].includes(s.attributes['deepq.step'] as number), `${s.name}: step ${s.attributes['deepq.step']}`);
  }
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const ancestors = (s: ReceivedSpan) => {
    const out: ReceivedSpan[] = [];
    for (let p = byId.get(s.parentSpanId ?? ''); p; p = byId.get(p.parentSpanId ?? '')) out.push(p);
    return out;
  };
  const secondPlan = processed.find((s) => s.name === 'process plan' && s.attributes['deepq.step'] === 2)!;
  const firstReflection = ancestors(secondPlan).find((s) => s.name === 'process reflect');
  assert.equal(firstReflection?.attributes['deepq.step'], 1, 'step 2 is planned inside step 1’s reflection');
});

test('model calls are spans with their usage, adding up to the goal’s tokens; tool calls are spans', () => {
  for (const { id, tokens } of goals) {
    const chats = traceOf(id).spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    assert.ok(chats.length >= 7, `goal ${id}: ${chats.length} model call spans`);
    for (const s of chats) {
      assert.equal(s.attributes['deepq.goal.id'], id);
      assert.equal(s.attributes['gen_ai.provider.name'], 'scripted');
      assert.equal(s.kind, 3, 'SpanKind.CLIENT (OTLP numbers it 3)');
    }
    const sum = chats.reduce(
      (n, s) =>
        n + Number(s.attributes['gen_ai.usage.input_tokens']) + Number(s.attributes['gen_ai.usage.output_tokens']),
      0,
    );
    assert.equal(sum, tokens, `goal ${id}: the spans' tokens against the goal's usage`);
    const roles = new Set(chats.map((s) => s.attributes['deepq.role']));
    for (const role of ['planner', 'reflector', 'research-specialist', 'code-writer', 'critic'])
      assert.ok(roles.has(role));
  }
  const tools = traceOf(goals[0]!.id).spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
  assert.ok(tools.length > 0, 'the code-writer’s tool calls');
  for (const s of tools) {
    assert.equal(s.service, 'deepq-worker-code-writer');
    assert.equal(s.name, `execute_tool ${s.attributes['gen_ai.tool.name']}`);
  }
});

test('two goals are two traces; BullMQ’s periodic chores make none', () => {
  const [a, b] = goals.map((g) => traceOf(g.id));
  assert.notEqual(a!.root.traceId, b!.root.traceId);
  for (const [t, g] of [
    [a!, goals[0]!],
    [b!, goals[1]!],
  ] as const) {
    const named = t.spans.map((s) => s.attributes['deepq.goal.id']).filter((x) => x !== undefined);
    assert.deepEqual([...new Set(named)], [g.id], 'no span of the other goal in this trace');
  }
  const chores = receiver.spans.filter((s) => /^(startStalledCheckTimer|moveStalledJobsToWait|close)\b/.test(s.name));
  assert.deepEqual(
    chores.map((s) => `${s.service} ${s.name}`),
    [],
  );
});

test("a goal's trace id and its root's span id come from its id alone", () => {
  for (const { id } of goals) {
    const hex = createHash('sha256').update(`deepq:${id}`).digest('hex');
    const { root } = traceOf(id);
    assert.equal(root.traceId, hex.slice(0, 32));
    assert.equal(root.spanId, hex.slice(32, 48));
  }
});

/** Waits for a span of the goal's trace that `match` accepts. */
async function spanOf(goalId: string, match: (s: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const hit = traceOf(goalId).spans.find(match);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error(`goal ${goalId}: no such span in its trace`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a resume and a cancel from another CLI process join the goal’s trace under its root', async () => {
  const r = await runCli(['enqueue', 'Reviewed traced goal', '--review', '--json'], fleet.env);
  await assertCliExit(r, 0, fleet);
  const id = JSON.parse(r.stdout.trim().split('\n').pop()!).goalId as string;
  assert.equal((await fleet.client.waitFor(id, { timeoutMs: 30_000 })).status, 'awaiting_human');
  await assertCliExit(await runCli(['resume', id, '--note', 'look again'], fleet.env), 0, fleet);
  assert.equal((await fleet.client.waitFor(id, { timeoutMs: 30_000 })).status, 'awaiting_human');
  await assertCliExit(await runCli(['cancel', id], fleet.env), 0, fleet);

  const { root } = traceOf(id);
  const resume = await spanOf(id, (s) => s.name === 'deepq resume');
  const cancel = await spanOf(id, (s) => s.name === 'deepq cancel');
  for (const s of [resume, cancel]) {
    assert.equal(s.service, 'deepq-cli');
    assert.equal(s.parentSpanId, root.spanId, `${s.name} hangs under the goal's root`);
  }
  // The cycle the resume started: its plan job's processing descends from the resume.
  const replanned = await spanOf(id, (s) => s.name === 'process plan' && s.attributes['deepq.step'] === 2);
  const byId = new Map(traceOf(id).spans.map((s) => [s.spanId, s]));
  let p = byId.get(replanned.parentSpanId ?? '');
  while (p && p !== resume) p = byId.get(p.parentSpanId ?? '');
  assert.equal(p, resume, 'step 2 was planned below the resume');
});

test('a goal enqueued by a producer that does not trace still joins its own trace from its first job', async () => {
  const untraced = Object.fromEntries(Object.entries(fleet.env).filter(([k]) => !k.startsWith('OTEL_')));
  const r = await runCli(['enqueue', 'Goal from an untraced producer', '--wait', '--json'], untraced);
  await assertCliExit(r, 0, fleet);
  const id = JSON.parse(r.stdout.trim().split('\n').pop()!).goalId as string;
  const hex = createHash('sha256').update(`deepq:${id}`).digest('hex');
  const [traceId, rootSpanId] = [hex.slice(0, 32), hex.slice(32, 48)];
  const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
  const deadline = Date.now() + 20_000;
  // Every job but the first plan's own processing span (BullMQ starts it before deepq's code runs).
  while (inTrace().filter((s) => s.name.startsWith('process ')).length < 6) {
    if (Date.now() > deadline) throw new Error(`goal ${id}: ${inTrace().length} spans in its trace`);
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(
    receiver.spans.filter((s) => s.name === 'deepq enqueue' && s.attributes['deepq.goal.id'] === id).length,
    0,
  );
  const planJob = inTrace().find((s) => s.name === 'deepq plan job');
  assert.ok(planJob, "the first plan job's handler ran in the goal's trace");
  assert.equal(planJob.parentSpanId, rootSpanId, "under the goal's root (never exported: no process made it)");
  assert.equal(planJob.service, 'deepq-planner');
  const names = new Set(inTrace().map((s) => s.name));
  for (const name of ['process reflect', 'process plan']) assert.ok(names.has(name), `${name} in the trace`);
  assert.ok(
    [...names].some((n) => n.startsWith('chat ')),
    'model calls in the trace',
  );
  // A job added with a trace context (all after the first) runs in it: no second span of its own.
  assert.equal(inTrace().filter((s) => s.name === 'deepq plan job').length, 1);
});

test('the inspector shows a goal’s trace id, linked where DEEPQ_TRACE_URL says traces are shown', async () => {
  const port = await freePort();
  const env = { ...fleet.env, DEEPQ_TRACE_URL: 'https://traces.example/trace/{traceId}?from=deepq&x=1' };
  const ui = startProcess('ui', ['ui', '--port', String(port)], env);
  try {
    await waitForStart(ui);
    const { id } = goals[0]!;
    const page = await (await fetch(`http://127.0.0.1:${port}/goals/${id}`)).text();
    const traceId = traceOf(id).root.traceId;
    assert.ok(
      page.includes(`<a href="https://traces.example/trace/${traceId}?from=deepq&amp;x=1" rel="noreferrer">`),
      'the trace row links the goal’s trace',
    );
  } finally {
    await stopProcess(ui);
  }
  const bad = await runCli(['ui', '--port', '0'], { ...fleet.env, DEEPQ_TRACE_URL: 'javascript:alert(1)//{traceId}' });
  assert.equal(bad.code, 78, bad.stderr);
  assert.match(bad.stderr, /traceUrl \(DEEPQ_TRACE_URL\): must be an http\(s\) URL/);
});

test("a job's log lines carry its trace's ids: a log backend links them to the goal's trace", () => {
  const { id } = goals[0]!;
  const { root, spans } = traceOf(id);
  const lines = fleet.procs
    .flatMap((p) => p.output().split('\n'))
    .filter((l) => l.startsWith('{') && l.includes(`"goalId":"${id}"`))
    .map((l) => JSON.parse(l) as { msg: string; trace_id?: string; span_id?: string });
  for (const msg of ['cycle dispatched', 'subtask finished', 'reflected']) {
    const hits = lines.filter((l) => l.msg === msg);
    assert.ok(hits.length > 0, `no "${msg}" line for goal ${id}`);
    for (const l of hits) {
      assert.equal(l.trace_id, root.traceId, msg);
      assert.ok(
        spans.some((s) => s.spanId === l.span_id),
        `${msg}: its span_id is a span of the trace`,
      );
    }
  }
});

test('a service with an endpoint that is no URL stops at start, naming the variable', async () => {
  const env = { ...fleet.env, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' };
  const r = await runCli(['planner'], env, 30_000);
  assert.equal(r.code, 78, r.stderr);
  assert.match(r.stderr, /OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/);
});
