// deepq_approvals_total counts each decision once: a resumed attempt that fails keeps its
// checkpoint and its retry takes the same decisions again, and a goal that ends afterwards
// cancels nothing that was already decided and counted.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from 'bullmq';
import pino from 'pino';
import { endPaused, type PausedJob, takeDecisions } from '../../services/subagent-worker/approval.ts';
import { type ApprovalRecord, inputPreview, type JobCheckpoint, newCallId } from '../../shared/goal/approvals.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

/** A goal whose job `jobId` waits on `n` calls; the paused job as takeDecisions sees it. */
async function pausedJob(jobId: string, n: number): Promise<{ p: PausedJob; callIds: string[] }> {
  const goalId = await t.newGoal();
  const now = Date.now();
  const threadId = `goal-${goalId}--code-writer-abcd1234`;
  const recs: ApprovalRecord[] = Array.from({ length: n }, (_, index) => ({
    callId: newCallId(),
    jobId,
    queue: 'subagent-code-writer',
    role: 'code-writer',
    step: 1,
    index,
    threadId,
    tool: 'write_file',
    input: inputPreview({ name: 'x.py' }),
    requestedAt: now,
    expiresAt: now + 60_000,
    status: 'pending',
  }));
  const agent = { messages: [], turns: 1, phaseTurns: 1, contractRetry: false, uses: [], awaiting: [] };
  const calls = recs.map((r, index) => ({ index, callId: r.callId }));
  const cp: JobCheckpoint = { threadId, startedAt: now, calls, agent };
  assert.deepEqual(await t.rt.approvals.request(goalId, jobId, cp, recs), { kind: 'ok' });
  const data = { goalId, step: 1, index: 0, role: 'code-writer' } as PausedJob['data'];
  const job = { id: jobId, queueName: 'subagent-code-writer' } as unknown as Job;
  const p: PausedJob = { rt: t.rt, job, data, threadId, startedAt: now, log: pino({ level: 'silent' }) };
  return { p, callIds: recs.map((r) => r.callId) };
}

async function counted(decision: string): Promise<number> {
  const { values } = await t.rt.metrics.approvals.get();
  return values.find((v) => v.labels.decision === decision)?.value ?? 0;
}

test('a retried resume takes the same decisions again but counts them once', async () => {
  const { p, callIds } = await pausedJob('job-retried', 2);
  const before = { approved: await counted('approved'), rejected: await counted('rejected') };
  await t.rt.approvals.decide(p.data.goalId, callIds[0]!, 'approved');
  await t.rt.approvals.decide(p.data.goalId, callIds[1]!, 'rejected', 'no');
  for (let attempt = 1; attempt <= 3; attempt++) {
    const saved = (await t.rt.approvals.checkpoint(p.data.goalId, 'job-retried'))!;
    const resumed = await takeDecisions(p, saved);
    assert.deepEqual(
      [...resumed.decisions.values()].map((d) => d.status),
      ['approved', 'rejected'],
      `attempt ${attempt} took other decisions`,
    );
  }
  assert.equal((await counted('approved')) - before.approved, 1);
  assert.equal((await counted('rejected')) - before.rejected, 1);
});

test('a checkpoint stored before the mark existed is counted on its first resume', async () => {
  const { p, callIds } = await pausedJob('job-old', 1);
  const before = await counted('approved');
  await t.rt.approvals.decide(p.data.goalId, callIds[0]!, 'approved');
  const saved = (await t.rt.approvals.checkpoint(p.data.goalId, 'job-old'))!;
  assert.equal(saved.counted, undefined);
  await takeDecisions(p, saved);
  assert.equal((await counted('approved')) - before, 1);
  assert.equal((await t.rt.approvals.checkpoint(p.data.goalId, 'job-old'))?.counted, true);
});

test('a goal that ends after a counted resume cancels nothing decided and counts nothing twice', async () => {
  const { p, callIds } = await pausedJob('job-ended', 1);
  await t.rt.approvals.decide(p.data.goalId, callIds[0]!, 'approved');
  await takeDecisions(p, (await t.rt.approvals.checkpoint(p.data.goalId, 'job-ended'))!);
  const before = { approved: await counted('approved'), cancelled: await counted('cancelled') };
  await endPaused(p, (await t.rt.approvals.checkpoint(p.data.goalId, 'job-ended'))!, 'cancelled');
  assert.deepEqual(
    { approved: await counted('approved'), cancelled: await counted('cancelled') },
    before,
    'an approval counted at the resume was counted again when the goal ended',
  );
  assert.equal(await t.rt.approvals.checkpoint(p.data.goalId, 'job-ended'), null);
});

test('a goal that ends while its calls wait counts each call cancelled once', async () => {
  const { p } = await pausedJob('job-waiting', 2);
  const before = await counted('cancelled');
  await endPaused(p, (await t.rt.approvals.checkpoint(p.data.goalId, 'job-waiting'))!, 'cancelled');
  assert.equal((await counted('cancelled')) - before, 2);
});
