// Approvals of risky tool calls, in Redis. Per goal: a hash of approval records by call id and
// a hash of jobs' checkpoints (each stored in parts: ./checkpoints.ts), both among the goal's
// keys, so the sweep and the TTL cover them; plus one global sorted set of every pending
// `<goalId>/<callId>` by when it times out (the pending gauge, `deepq approvals`). Requesting is
// one idempotent script (lua/approvalRequest.lua), deciding another that only changes a pending
// record (lua/approvalDecide.lua). Call ids are deepq's own (`ap-` and 10 base36 characters): short
// enough to type, and never the model's tool_use id, so no model text ever picks a key.
import { randomInt } from 'node:crypto';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AgentCheckpoint, ApprovalDecisionStatus } from '../agent/approval.ts';
import { ValidationError } from '../errors.ts';
import type { Queues } from '../runtime/queues.ts';
import { runScript } from '../runtime/scripts.ts';
import { cutText } from '../text.ts';
import { CheckpointWriter, checkpointHeadField, checkpointOfReply, usesInMessages } from './checkpoints.ts';
import type { TimelineEventBody } from './events.ts';
import type { Keys } from './keys.ts';

export type ApprovalStatus = 'pending' | ApprovalDecisionStatus;

export interface ApprovalRecord {
  callId: string;
  /** The paused job and its queue: what `approve` promotes. */
  jobId: string;
  queue: string;
  role: string;
  step: number;
  index: number;
  threadId: string;
  /** The configured tool name. */
  tool: string;
  /** The call's input as JSON, cut at INPUT_PREVIEW_CHARS: model text, untrusted. */
  input: string;
  requestedAt: number;
  expiresAt: number;
  status: ApprovalStatus;
  reason?: string;
  decidedAt?: number;
}

/** What a paused job keeps: the agent's checkpoint, and the call id each awaiting call got. */
export interface JobCheckpoint {
  threadId: string;
  startedAt: number;
  calls: { index: number; callId: string }[];
  agent: AgentCheckpoint;
  /** Input plus output tokens the job's run had used when it paused (its subtask's total goes on from it). */
  tokens?: number;
  /** The decisions were counted in deepq_approvals_total (a retried resume does not count them again). */
  counted?: boolean;
  /**
   * Saved by an attempt whose model call failed (its attemptsMade + 1): the next attempt goes
   * on from it and appends its own subtask_started. A 429 hands the job back without using an
   * attempt, so its resume starts no new one.
   */
  failedAttempt?: number;
  /**
   * Stored after a tool call while the run went on (its progress): a start that finds it knows
   * the run did not end on purpose (its process died) and goes on from there.
   */
  running?: boolean;
}

export type RequestOutcome =
  | { kind: 'ok' }
  /** The job already has pending calls (a replay or a re-delivery): nothing was added. */
  | { kind: 'waiting'; callIds: string[] }
  | { kind: 'terminal'; status: string }
  | { kind: 'gone' };

export type DecideOutcome =
  | { kind: 'ok'; record: ApprovalRecord; pendingLeft: number }
  | { kind: 'decided'; record: ApprovalRecord }
  /** A human's decision at or after the call's expiresAt: refused, the call left to time out. */
  | { kind: 'expired'; record: ApprovalRecord }
  | { kind: 'no_goal' }
  | { kind: 'no_call' };

export const CALL_ID_RE = /^ap-[0-9a-z]{10}$/;
export const INPUT_PREVIEW_CHARS = 300;
/** The longest reason a human may give with a decision (the model reads it). */
export const APPROVAL_REASON_MAX_CHARS = 1000;
const BASE36 = '0123456789abcdefghijklmnopqrstuvwxyz';

export function newCallId(): string {
  let id = 'ap-';
  for (let i = 0; i < 10; i++) id += BASE36[randomInt(36)];
  return id;
}

export function isCallId(value: string): boolean {
  return CALL_ID_RE.test(value);
}

/** A call's input as the timeline and `deepq status` show it. */
export function inputPreview(input: unknown): string {
  let json: string;
  try {
    json = JSON.stringify(input) ?? 'null';
  } catch {
    json = String(input);
  }
  return cutText(json, INPUT_PREVIEW_CHARS);
}

export class ApprovalStore {
  constructor(
    private readonly redis: Redis,
    readonly keys: Keys,
    private readonly opts: { keyTtlSeconds: number; eventsMaxLen: number },
  ) {}

  /**
   * Stores a paused job's checkpoint (whole, by its run's writer) and its pending calls, with an
   * `approval_requested` event each.
   */
  async request(
    goalId: string,
    jobId: string,
    cp: JobCheckpoint,
    records: ApprovalRecord[],
    writer = new CheckpointWriter(),
  ): Promise<RequestOutcome> {
    const k = this.keys;
    const keys = [k.goal(goalId), k.approvals(goalId), k.checkpoints(goalId), k.events(goalId)];
    keys.push(k.approvalsPending(), k.files(goalId), k.content(goalId), k.threads(goalId), k.history(goalId));
    const events = records.map((r) => JSON.stringify({ ...requestedEvent(r), at: r.requestedAt }));
    const args = [jobId, records.map((r) => JSON.stringify(r)).join('\n'), events.join('\n')];
    args.push(String(this.opts.eventsMaxLen), String(this.opts.keyTtlSeconds), goalId);
    const write = writer.next(cp, true);
    const reply = (await writer.sent(runScript(this.redis, 'approvalRequest', keys, [...args, ...write]))) as string[];
    const [kind, ...rest] = reply;
    if (kind !== 'ok') writer.unstored();
    if (kind === 'ok' || kind === 'gone') return { kind };
    if (kind === 'waiting') return { kind, callIds: rest };
    if (kind === 'terminal') return { kind, status: rest[0] ?? '' };
    throw new Error(`approvalRequest: unexpected reply ${JSON.stringify(reply)}`);
  }

  /**
   * Decides a pending call; reports an unknown goal or call, or a call decided before. A human's
   * decision (approved, rejected) on a goal that has ended is refused, a ValidationError saying
   * so: the call never runs, whatever is decided (its job ends as skipped). Without `now`, the
   * expiry is judged on Redis's clock: a human decides from a host whose clock may be off.
   */
  async decide(
    goalId: string,
    callId: string,
    decision: ApprovalDecisionStatus,
    reason?: string,
    now?: number,
  ): Promise<DecideOutcome> {
    if (reason && reason.length > APPROVAL_REASON_MAX_CHARS)
      throw new ValidationError(`the reason is ${reason.length} characters long: at most ${APPROVAL_REASON_MAX_CHARS}`);
    const k = this.keys;
    const keys = [k.goal(goalId), k.approvals(goalId), k.events(goalId), k.approvalsPending()];
    const given = reason ? cutText(reason, APPROVAL_REASON_MAX_CHARS) : '';
    const args = [callId, decision, given, now ?? '', this.opts.eventsMaxLen, goalId];
    const reply = (await runScript(this.redis, 'approvalDecide', keys, args)) as [string, string?, (number | string)?];
    const [kind, raw, left] = reply;
    if (kind === 'no_goal' || kind === 'no_call') return { kind };
    const record = JSON.parse(raw ?? '{}') as ApprovalRecord;
    if (kind === 'ended') throw endedGoalDecision(goalId, callId, decision, String(left));
    if (kind === 'decided' || kind === 'expired') return { kind, record };
    if (kind === 'ok') return { kind, record, pendingLeft: Number(left ?? 0) };
    throw new Error(`approvalDecide: unexpected reply ${JSON.stringify(reply)}`);
  }

  /** A job's checkpoint, its messages included (lua/checkpointRead.lua); null when it has none. */
  async checkpoint(goalId: string, jobId: string): Promise<JobCheckpoint | null> {
    const reply = await runScript(this.redis, 'checkpointRead', [this.keys.checkpoints(goalId)], [jobId]);
    return checkpointOfReply(reply as (string | null)[]);
  }

  /** A job's checkpoint, maybe without its messages: its calls and its turn's tool uses. */
  async checkpointHead(goalId: string, jobId: string): Promise<JobCheckpoint | null> {
    const [inParts, whole] = await this.redis.hmget(this.keys.checkpoints(goalId), checkpointHeadField(jobId), jobId);
    const raw = inParts ?? whole;
    const head = raw ? (JSON.parse(raw) as JobCheckpoint) : null;
    return head && usesInMessages(head) ? this.checkpoint(goalId, jobId) : head;
  }

  /**
   * Waiting calls' whole inputs, as pretty JSON (a record holds a preview cut at
   * INPUT_PREVIEW_CHARS): what approving each would run. Read from their jobs' checkpoint heads
   * (the paused turn's tool uses, not the conversation), each read and parsed once; null for a
   * call whose checkpoint is gone (it was decided and its job went on).
   */
  async fullInputs(recs: Pick<ApprovalRecord, 'jobId' | 'callId'>[], goalOf: (i: number) => string) {
    const checkpoints = new Map<string, Promise<JobCheckpoint | null>>();
    return Promise.all(
      recs.map(async (rec, i) => {
        const key = `${goalOf(i)}/${rec.jobId}`;
        if (!checkpoints.has(key)) checkpoints.set(key, this.checkpointHead(goalOf(i), rec.jobId));
        const cp = await checkpoints.get(key);
        const call = cp?.calls.find((c) => c.callId === rec.callId);
        const use = call && cp?.agent.uses[call.index];
        return use ? (JSON.stringify(use.input, null, 2) ?? 'null') : null;
      }),
    );
  }

  /**
   * A checkpoint without approval calls (a run that stopped at its goal's budget, a failed
   * attempt, a resumed turn), stored whole by its run's writer (lua/checkpointSave.lua).
   */
  async saveCheckpoint(goalId: string, jobId: string, cp: JobCheckpoint, writer = new CheckpointWriter()) {
    const write = writer.next(cp, true);
    await writer.sent(runScript(this.redis, 'checkpointSave', [this.keys.checkpoints(goalId)], [jobId, ...write]));
  }

  async clearCheckpoint(goalId: string, jobId: string): Promise<void> {
    await runScript(this.redis, 'checkpointClear', [this.keys.checkpoints(goalId)], [jobId]);
  }

  /** The goal's approval records, oldest first. */
  async records(goalId: string): Promise<ApprovalRecord[]> {
    const all = await this.redis.hvals(this.keys.approvals(goalId));
    return all.map((raw) => JSON.parse(raw) as ApprovalRecord).sort((a, b) => a.requestedAt - b.requestedAt);
  }

  async record(goalId: string, callId: string): Promise<ApprovalRecord | null> {
    const raw = await this.redis.hget(this.keys.approvals(goalId), callId);
    return raw ? (JSON.parse(raw) as ApprovalRecord) : null;
  }

  /**
   * How many calls wait for a human, across all goals (the pending gauge): not the ones whose
   * time ran out, which the reflector's sweep decides `timeout` at its next pass.
   */
  pendingCount(now = Date.now()): Promise<number> {
    return this.redis.zcount(this.keys.approvalsPending(), now, '+inf');
  }

  /** Pending calls whose time ran out by `now`, across all goals, the oldest first. */
  async expiredPending(now: number, limit = 1000): Promise<{ goalId: string; callId: string }[]> {
    const members = await this.redis.zrangebyscore(this.keys.approvalsPending(), '-inf', now, 'LIMIT', 0, limit);
    return members.map((m) => {
      const [goalId = '', callId = ''] = m.split('/');
      return { goalId, callId };
    });
  }

  /** Drops a pending-set member whose goal or record is gone (it would never be decided). */
  async dropPending(goalId: string, callId: string): Promise<void> {
    await this.redis.zrem(this.keys.approvalsPending(), `${goalId}/${callId}`);
  }

  /** Pending calls across all goals whose time has not run out, the soonest to time out first. */
  async pendingAll(limit = 1000, now = Date.now()): Promise<{ goalId: string; callId: string; expiresAt: number }[]> {
    const key = this.keys.approvalsPending();
    const flat = await this.redis.zrangebyscore(key, now, '+inf', 'WITHSCORES', 'LIMIT', 0, limit);
    const out: { goalId: string; callId: string; expiresAt: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const [goalId = '', callId = ''] = flat[i]!.split('/');
      out.push({ goalId, callId, expiresAt: Number(flat[i + 1]) });
    }
    return out;
  }
}

/** A call a human can still decide: pending, its time not run out (the sweep times it out later). */
export function isAwaitingDecision(r: Pick<ApprovalRecord, 'status' | 'expiresAt'>, now = Date.now()): boolean {
  return r.status === 'pending' && r.expiresAt > now;
}

/** Why a call was refused by itself: its own timeout, read from the record (workers may differ). */
export function timeoutReason(r: Pick<ApprovalRecord, 'requestedAt' | 'expiresAt'>): string {
  return `no decision within ${Math.round((r.expiresAt - r.requestedAt) / 1000)} s (approvalTimeoutSeconds)`;
}

/** Why a human's decision on an ended goal's call is refused (no tool name: that is model text). */
function endedGoalDecision(goalId: string, callId: string, decision: string, status: string): ValidationError {
  const verb = decision === 'approved' ? 'approve' : 'reject';
  return new ValidationError(
    `goal ${goalId} has ended (${status}): too late to ${verb} ${callId}, ` +
      'the call never runs and its subtask does not go on',
  );
}

function requestedEvent(r: ApprovalRecord): TimelineEventBody {
  const { step, index, role, threadId, callId, tool, input, expiresAt } = r;
  return { type: 'approval_requested', step, index, role, threadId, callId, tool, input, expiresAt };
}

/**
 * Wakes a paused job now instead of at its timeout (a job no longer delayed is left alone: it
 * is running, or already woke). Returns whether it was promoted.
 */
export async function promotePaused(queues: Queues, record: Pick<ApprovalRecord, 'queue' | 'jobId'>) {
  const job: Job | undefined = await queues.get(record.queue).getJob(record.jobId);
  if (!job || (await job.getState()) !== 'delayed') return false;
  return job.promote().then(
    () => true,
    () => false, // it stopped being delayed meanwhile
  );
}

/**
 * Decides every pending call of a goal `cancelled` (the goal ended) and wakes the paused jobs,
 * which then end at once as skipped. Returns the ids of the jobs that were paused.
 */
export async function releaseApprovals(
  state: { approvals: ApprovalStore; queues: Queues },
  goalId: string,
  reason: string,
): Promise<Set<string>> {
  const paused = new Set<string>();
  for (const r of await state.approvals.records(goalId)) {
    if (r.status !== 'pending') continue;
    paused.add(r.jobId);
    const d = await state.approvals.decide(goalId, r.callId, 'cancelled', reason);
    if (d.kind === 'ok' && d.pendingLeft === 0) await promotePaused(state.queues, r);
  }
  return paused;
}
