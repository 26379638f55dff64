// A subagent job waiting for a human's approval. When the agent loop pauses (ApprovalPause),
// the job stores its checkpoint and pending calls (shared/goal/approvals.ts), then moves
// itself to BullMQ's delayed set until the calls time out: no attempt is used, no worker slot
// is held, and the cycle's reflect parent keeps waiting for this child. `deepq approve|reject`
// promotes it; whichever worker takes it next resumes from the checkpoint with the decisions.
import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { AgentCheckpoint, ApprovalDecision, ApprovalPause } from '../../shared/agent/approval.ts';
import {
  type ApprovalRecord,
  inputPreview,
  type JobCheckpoint,
  newCallId,
  timeoutReason,
} from '../../shared/goal/approvals.ts';
import type { CheckpointWriter } from '../../shared/goal/checkpoints.ts';
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { cutText } from '../../shared/text.ts';

/** What a resumed run goes on from: the agent's checkpoint and the decisions on its calls. */
export interface Resumed {
  agent: AgentCheckpoint;
  decisions: Map<number, ApprovalDecision>;
  /** The job's checkpoint it resumes from. */
  saved: JobCheckpoint;
}

/** The paused job, as the steps below need it. */
export interface PausedJob {
  rt: Runtime;
  job: Job;
  token?: string;
  data: SubagentJob;
  threadId: string;
  startedAt: number;
  log: Logger;
  /** Every token its run has used so far (cache too), kept across its pauses (in the checkpoint). */
  tokens?: number;
  /** The run's checkpoint after its last tool call (stored: a redelivery goes on from it). */
  progress?: AgentCheckpoint;
  /** Stores this run's checkpoints, each after the first only what changed (one per run). */
  checkpoints?: CheckpointWriter;
  /** A checkpoint of the job is stored (found at its start, or saved after a tool call): its run's end deletes it. */
  checkpointStored?: boolean;
}

/**
 * Stores the pause and moves the job to delayed until its calls time out. Returns the goal's
 * terminal status when the goal ended meanwhile (nothing stored then); otherwise throws
 * DelayedError, which tells BullMQ the job moved itself.
 */
export async function pauseForApproval(p: PausedJob, pause: ApprovalPause): Promise<string> {
  const { rt, job, data } = p;
  const jobId = String(job.id);
  const now = Date.now();
  const expiresAt = now + rt.cfg.approvalTimeoutSeconds * 1000;
  const cp = pause.checkpoint;
  const calls = cp.awaiting.map((a) => ({ index: a.index, callId: newCallId() }));
  const records: ApprovalRecord[] = cp.awaiting.map((a, k) => ({
    callId: calls[k]!.callId,
    jobId,
    queue: job.queueName,
    role: data.role,
    step: data.step,
    index: data.index,
    threadId: p.threadId,
    tool: cutText(a.tool, 200),
    input: inputPreview(cp.uses[a.index]?.input),
    requestedAt: now,
    expiresAt,
    status: 'pending',
  }));
  const saved: JobCheckpoint = { threadId: p.threadId, startedAt: p.startedAt, calls, agent: cp, tokens: p.tokens };
  const r = await rt.approvals.request(data.goalId, jobId, saved, records, p.checkpoints);
  if (r.kind === 'terminal') return r.status;
  if (r.kind === 'gone') return 'gone';
  // 'waiting': an earlier request of this job stands (a replayed script): wait on that one.
  const until = r.kind === 'ok' ? expiresAt : await pendingUntil(rt, data.goalId, jobId);
  const ids = r.kind === 'ok' ? calls.map((c) => c.callId) : r.callIds;
  p.log.info({ calls: ids, tools: cp.awaiting.map((a) => a.tool), expiresAt: until }, 'waiting for approval');
  return waitForHuman(p, until);
}

/**
 * A paused job started again: the decisions on its calls, a call past its timeout decided
 * `timeout` (atomically: a human deciding at that moment wins or loses cleanly). Calls still
 * undecided and not expired (an early wake-up): the job goes back to waiting, DelayedError.
 */
export async function takeDecisions(p: PausedJob, saved: JobCheckpoint): Promise<Resumed> {
  const { rt, data } = p;
  const now = Date.now();
  const decisions = new Map<number, ApprovalDecision>();
  let waitUntil = 0;
  for (const { index, callId } of saved.calls) {
    let rec = await rt.approvals.record(data.goalId, callId);
    if (rec?.status === 'pending' && rec.expiresAt <= now) {
      const d = await rt.approvals.decide(data.goalId, callId, 'timeout', timeoutReason(rec), now);
      // A timeout is counted by whoever decides it (here, or the reflector's sweep).
      if (d.kind === 'ok') rt.metrics.approvals.inc({ decision: 'timeout' });
      if (d.kind === 'ok' || d.kind === 'decided') rec = d.record;
    }
    if (!rec) decisions.set(index, { status: 'cancelled', reason: 'its approval request is gone' });
    else if (rec.status === 'pending') waitUntil = Math.max(waitUntil, rec.expiresAt);
    else decisions.set(index, { status: rec.status, ...(rec.reason ? { reason: rec.reason } : {}) });
  }
  if (waitUntil) await waitForHuman(p, waitUntil);
  const statuses = [...decisions.values()].map((d) => d.status);
  await countOnce(p, saved, statuses);
  p.log.info({ decisions: statuses }, 'resuming after approval');
  return { agent: saved.agent, decisions, saved };
}

/**
 * Counts a pause's decisions in deepq_approvals_total once: a resumed attempt that fails keeps
 * the checkpoint, and its retry resumes from it again. The mark is stored before the count.
 * Timeouts are left out: counted where they are decided (takeDecisions, the reflector's sweep).
 */
async function countOnce(p: PausedJob, saved: JobCheckpoint, decisions: string[]): Promise<void> {
  if (saved.counted) return;
  saved.counted = true;
  await p.rt.approvals.saveCheckpoint(p.data.goalId, String(p.job.id), saved, p.checkpoints);
  for (const decision of decisions) if (decision !== 'timeout') p.rt.metrics.approvals.inc({ decision });
}

/** The goal ended while the job waited: its calls are cancelled (if still pending), the pause cleared. */
export async function endPaused(p: PausedJob, saved: JobCheckpoint, status: string): Promise<void> {
  const { rt, data } = p;
  for (const { callId } of saved.calls) {
    const d = await rt.approvals.decide(data.goalId, callId, 'cancelled', `the goal is ${status}`);
    // A cancellation made here counts; an earlier decision counts unless a resume counted it
    // (a timeout was counted when it was decided).
    const counts = d.kind === 'ok' || (d.kind === 'decided' && !saved.counted && d.record.status !== 'timeout');
    if (counts) rt.metrics.approvals.inc({ decision: d.record.status });
  }
  await rt.approvals.clearCheckpoint(data.goalId, String(p.job.id));
}

/**
 * Moves the job to delayed until `until`. A decision that landed before the move found no
 * delayed job to promote, so the pending calls are read again after it: none left → the job
 * promotes itself. Always throws DelayedError (BullMQ then leaves the job where it is).
 */
async function waitForHuman(p: PausedJob, until: number): Promise<never> {
  if (!p.token) throw new Error('a job waiting for approval needs its lock token (run it in a worker)');
  await p.job.moveToDelayed(until, p.token);
  if ((await pendingUntil(p.rt, p.data.goalId, String(p.job.id))) === 0) {
    await p.job.promote().catch(() => {}); // already woken by the decider: fine
  }
  throw new DelayedError();
}

/** When the job's last pending call times out; 0 when none is pending. */
async function pendingUntil(rt: Runtime, goalId: string, jobId: string): Promise<number> {
  const pending = (await rt.approvals.records(goalId)).filter((r) => r.jobId === jobId && r.status === 'pending');
  return pending.reduce((t, r) => Math.max(t, r.expiresAt), 0);
}
