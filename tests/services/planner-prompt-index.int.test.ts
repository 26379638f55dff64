// Planner and reflector prompts carry only the file index (name, status, bytes), never an
// artifact's content: neither the message builders nor the model requests the real jobs send.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Job } from 'bullmq';
import { processPlanJob } from '../../services/planner/plan-job.ts';
import { plannerMessage } from '../../services/planner/prompt.ts';
import type { SubtaskOutcome } from '../../services/reflector/outcomes.ts';
import { reflectorMessage } from '../../services/reflector/prompt.ts';
import { processReflectJob } from '../../services/reflector/reflect-job.ts';
import type { ModelProvider, ModelRequest } from '../../shared/agent/providers/types.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { SubagentJobResult } from '../../shared/runtime/jobs.ts';
import { formatIndex } from '../../shared/vfs/vfs.ts';
import { useRedis } from '../../testing/redis.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
const requests: ModelRequest[] = [];

before(async () => {
  await redis.ready;
  // Depth 20: the reflect job at cycle 6 asks the model rather than escalating at depth 5.
  t = vfsRuntime(redis.url, {}, { maxDepth: 20 });
  // Record every model request the planner and reflector send (the scripted model answers).
  const inner = t.rt.provider;
  const recording: ModelProvider = {
    name: inner.name,
    createMessage: async (req, ctx) => {
      requests.push(structuredClone(req));
      return inner.createMessage(req, ctx);
    },
  };
  t.rt.provider = recording;
});
after(async () => {
  await t?.close();
});

const MARKER = `SECRET-CONTENT-${randomUUID()}`;

/** A goal whose artifacts all carry the marker: inline, spilled, failed, active and evicted. */
async function goalWithMarkedArtifacts(): Promise<string> {
  const goalId = await t.newGoal('Write and review a sorting function');
  const w = (name: string, content: string, status: 'active' | 'done' | 'failed', step: number) =>
    t.rt.vfs.write(goalId, name, content, {
      status,
      step,
      role: 'code-writer',
      threadId: `goal-${goalId}--code-writer-1`,
      writer: `${goalId}:${step}:${name}`,
    });
  await w('old-notes.md', `notes ${MARKER}`, 'done', 1);
  await w('research.md', `# Research\n${MARKER}\nfacts`, 'done', 5);
  await w('solution.py', `def solve(v):\n    return sorted(v)  # ${MARKER}`, 'done', 5);
  await w('critique.json', JSON.stringify([{ line: 1, issue: MARKER, severity: 'low' }]), 'failed', 5);
  await w('draft.md', `draft ${MARKER}`, 'active', 5);
  await w('data.csv', `${MARKER},`.repeat(Math.ceil((t.rt.cfg.vfs.spillBytes + 10) / (MARKER.length + 1))), 'done', 5);
  await t.rt.vfs.evict(goalId, 5); // old-notes.md becomes a tombstone
  return goalId;
}

function assertIndexOnly(text: string, index: Awaited<ReturnType<VfsTestRuntime['rt']['vfs']['index']>>) {
  assert.ok(!text.includes(MARKER), "an artifact's content reached the prompt");
  assert.ok(!text.includes('SECRET-CONTENT'), "part of an artifact's content reached the prompt");
  for (const e of index) {
    if (e.status === 'evicted') assert.ok(text.includes(`${e.name} [evicted]`), `tombstone ${e.name} missing`);
    else assert.ok(text.includes(`${e.name} [${e.status}, ${e.bytes} bytes]`), `index line of ${e.name} missing`);
  }
}

test("plannerMessage carries each file's name, status and bytes, never its content", async () => {
  const goalId = await goalWithMarkedArtifacts();
  // The goal also has a prior plan and a reflection, as at any later cycle: cycle 5 was
  // planned, dispatched and reflected on (decision continue), and the goal waits for cycle 6.
  const plan = {
    subtasks: [
      {
        role: 'critic',
        instruction: 'review solution.py',
        expected_artifact: 'critique.json',
        read_files: ['solution.py'],
      },
    ],
  };
  const lc = t.rt.lifecycle;
  assert.ok(await lc.beginPlanning(goalId));
  assert.ok(await lc.dispatch(goalId, 5, plan, { threadId: threadIdFor(goalId, 'planner', 'p5') }));
  assert.ok(await lc.beginReflecting(goalId));
  assert.ok(
    await lc.requeue(goalId, {
      step: 5,
      reflection: { decision: 'continue', reason: 'the critique failed' },
      outcomes: [{ index: 0, status: 'failed' }],
    }),
  );
  const goal = (await t.rt.goals.get(goalId))!;
  assert.equal(goal.status, 'queued');
  assert.deepEqual(goal.plan, plan);
  assert.deepEqual(goal.reflection, { decision: 'continue', reason: 'the critique failed', step: 5 });
  const index = await t.rt.vfs.index(goalId);
  assert.equal(index.length, 6);
  assert.ok(index.some((e) => e.status === 'evicted'));
  assert.ok(index.some((e) => e.blobRef));
  const msg = plannerMessage(goal, 6, index);
  assertIndexOnly(msg, index);
  assert.ok(msg.includes(formatIndex(index)));
});

test("reflectorMessage carries each file's name, status and bytes, never its content", async () => {
  const goalId = await goalWithMarkedArtifacts();
  const goal = (await t.rt.goals.get(goalId))!;
  const index = await t.rt.vfs.index(goalId);
  const outcomes: SubtaskOutcome[] = [
    {
      index: 0,
      role: 'research-specialist',
      artifact: 'research.md',
      status: 'done',
      bytes: index.find((e) => e.name === 'research.md')!.bytes,
    },
    {
      index: 1,
      role: 'critic',
      artifact: 'critique.json',
      status: 'failed',
      reason: 'output broke the critique contract twice',
    },
  ];
  assertIndexOnly(reflectorMessage(goal, 5, outcomes, index), index);
});

test('the prompt does not grow with artifact sizes: only the byte counts change', async () => {
  const goalId = await t.newGoal('size check');
  const m = { status: 'done' as const, step: 1, writer: 'w' };
  await t.rt.vfs.write(goalId, 'report.md', 'x'.repeat(1000), m);
  const goal = (await t.rt.goals.get(goalId))!;
  const small = plannerMessage(goal, 2, await t.rt.vfs.index(goalId));
  await t.rt.vfs.write(goalId, 'report.md', 'x'.repeat(1_000_000), m);
  const large = plannerMessage(goal, 2, await t.rt.vfs.index(goalId));
  assert.equal(large.length - small.length, String(1_000_000).length - String(1000).length);
});

test("the model requests of a real plan job and reflect job never contain an artifact's content", async () => {
  const goalId = await goalWithMarkedArtifacts(); // queued, as a new goal is
  requests.length = 0;

  const planJob = {
    id: `${goalId}:6:plan`,
    name: 'plan',
    data: { goalId, step: 6 },
    attemptsMade: 0,
    opts: {},
  } as unknown as Job;
  const planned = await processPlanJob(t.rt, planJob);
  assert.equal(planned.status, 'dispatched', JSON.stringify(planned));

  const child = (i: number, artifact: string): SubagentJobResult => ({
    artifact_name: artifact,
    status: 'done',
    notes: null,
    role: 'research-specialist',
    threadId: `goal-${goalId}--research-specialist-${i}`,
    bytes: 10,
    startedAt: Date.now(),
    finishedAt: Date.now(),
  });
  const goal = (await t.rt.goals.get(goalId))!;
  const values = Object.fromEntries(
    goal.plan!.subtasks.map((s, i) => [
      `${t.rt.cfg.prefix}:subagent-${s.role}:${goalId}:6:${i}`,
      child(i, s.expected_artifact),
    ]),
  );
  const reflectJob = {
    id: `${goalId}:6:reflect`,
    name: 'reflect',
    data: { goalId, step: 6 },
    attemptsMade: 0,
    opts: {},
    getChildrenValues: async () => values,
    getIgnoredChildrenFailures: async () => ({}),
  } as unknown as Job;
  const reflected = await processReflectJob(t.rt, reflectJob);
  assert.ok(reflected.decision, JSON.stringify(reflected));

  const system = (r: ModelRequest) => (typeof r.system === 'string' ? r.system : r.system.map((b) => b.text).join(''));
  const planner = requests.filter((r) => system(r).startsWith('You are the planner'));
  const reflector = requests.filter((r) => system(r).startsWith('You are the reflection'));
  assert.ok(planner.length >= 1, 'no planner request recorded');
  assert.ok(reflector.length >= 1, 'no reflector request recorded');
  for (const r of [...planner, ...reflector]) {
    const wire = JSON.stringify(r);
    assert.ok(!wire.includes(MARKER), `a ${system(r).slice(0, 20)} request carried an artifact's content`);
  }
  // They did carry the index.
  assert.match(JSON.stringify(planner[0]!.messages), /solution\.py \[done, \d+ bytes\]/);
  assert.match(JSON.stringify(reflector[0]!.messages), /research\.md \[done, \d+ bytes\]/);
});

test('the reflector is told the step budget, and at its last cycle that going on runs out of it', async () => {
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, 'a goal with two cycles', { maxSteps: 2 }, false);
  const goal = (await t.rt.goals.get(goalId))!;
  const first = reflectorMessage(goal, 1, [], []);
  assert.match(first, /^Step budget: cycle 1 of at most 2$/m);
  const last = reflectorMessage(goal, 2, [], []);
  assert.match(last, /^Step budget: cycle 2 of at most 2: the last one\. "continue" or "replan" would run out/m);
  const unbounded = reflectorMessage({ ...goal, budgets: {} }, 2, [], []);
  assert.doesNotMatch(unbounded, /Step budget/);
});
