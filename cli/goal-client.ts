// The producer side: enqueue goals, cancel, resume and follow them (reading is GoalReader's).
import type { Redis } from 'ioredis';
import type { ApprovalDecisionStatus } from '../shared/agent/approval.ts';
import { MIN_CALL_TOKENS } from '../shared/agent/providers/types.ts';
import { UnknownGoalError, ValidationError } from '../shared/errors.ts';
import {
  type ApprovalRecord,
  isCallId,
  promotePaused,
  releaseApprovals,
  timeoutReason,
} from '../shared/goal/approvals.ts';
import { type Budgets, budgetProblem, MAX_BUDGET_SECONDS, timeBudgetEnd } from '../shared/goal/budgets.ts';
import { type CostEstimate, estimateCost, formatCost, knownCostUsd } from '../shared/goal/cost.ts';
import type { TimelineEvent } from '../shared/goal/events.ts';
import { GoalIdSchema, newGoalId, newOperationId } from '../shared/goal/ids.ts';
import type { GoalLifecycle } from '../shared/goal/lifecycle.ts';
import { isPausedForBudget, parkedQueue, promoteParked } from '../shared/goal/parking.ts';
import { MAX_SUBTASKS } from '../shared/goal/plan.ts';
import { currentCycle, isTerminal } from '../shared/goal/status.ts';
import { type GoalRecord, totalTokens } from '../shared/goal/store.ts';
import { type Config, redactUrl } from '../shared/runtime/config.ts';
import { LEASE_MS, withLease } from '../shared/runtime/lease.ts';
import {
  deadlineJobId,
  MAINTENANCE_QUEUE,
  PLAN_QUEUE,
  planJobId,
  type Queues,
  REFLECT_QUEUE,
  reflectJobId,
  subagentQueueName,
  subtaskJobId,
} from '../shared/runtime/queues.ts';
import { openState, type State } from '../shared/runtime/state.ts';
import { inGoalRoot, inGoalTrace } from '../shared/runtime/tracing.ts';
import { parseOrThrow } from '../shared/zod.ts';
import { GoalReader } from './goal-reader.ts';
import { type GoalRequest, GoalRequestSchema, type GoalSubmission, type InputFile } from './goal-request.ts';
import { goalIdForKey, INPUT_WRITER, requestFingerprint } from './goal-submission.ts';
import { answered, type PatienceOptions, RedisLostError } from './redis-patience.ts';
import { stopGoal } from './stop-goal.ts';

export type { GoalSummary } from './goal-reader.ts';
export type { GoalSubmission } from './goal-request.ts';

/** The goal a submission made, or found under its idempotency key (created false). */
export interface Submitted {
  goalId: string;
  created: boolean;
}

export interface FollowOptions {
  timeoutMs?: number;
  pollMs?: number;
  stopOnPause?: boolean;
  /** Redis going away mid-follow: told after a few seconds, given up on past `redis.limitMs`. */
  redis?: PatienceOptions;
  /** Each look at the goal, news or not (a follow that tells the user why nothing happens). */
  onPoll?: (goal: GoalRecord) => Promise<void> | void;
}

export interface FollowBatch {
  events: { id: string; event: TimelineEvent }[];
  goal: GoalRecord;
  settled: boolean;
}

export class GoalClient extends GoalReader {
  private readonly state: State;
  readonly lifecycle: GoalLifecycle;
  readonly queues: Queues;
  /** `failFast`: its BullMQ connection too fails a command while Redis is away (createRedis). */
  constructor(cfg: Config, redis?: Redis, opts: { failFast?: boolean } = {}) {
    const state = openState(cfg, 'cli', { redis, failFast: opts.failFast });
    super(cfg, state.redis, state);
    this.state = state;
    this.lifecycle = state.lifecycle;
    this.queues = state.queues;
  }

  async enqueue(input: GoalSubmission): Promise<string> {
    return (await this.submit(input)).goalId;
  }

  /**
   * Stores a goal with the files it starts with, then its plan job. With an idempotency key the
   * goal's id is the key's: the same request again finds the goal (created false) and adds
   * nothing; another request under a key already used is refused, naming the goal.
   */
  async submit(input: GoalSubmission): Promise<Submitted> {
    const req = parseOrThrow(GoalRequestSchema, input, 'goal request');
    await this.checkInputs(req.files);
    const fingerprint = req.key === undefined ? '' : requestFingerprint(req);
    // With tracing on, the root of the goal's trace: its plan job's add, and so every job after, under it.
    const stored = (goalId: string) =>
      inGoalRoot(goalId, 'deepq enqueue', { 'deepq.goal.id': goalId }, () => this.store(goalId, req, fingerprint));
    if (req.key === undefined) return stored(newGoalId());
    const key = req.key;
    const goalId = await this.keyedGoalId(key);
    // One submission of a key at a time: the files of a request then refused never reach the goal.
    return this.oneAtATime(this.goals.keys.keySubmission(goalId), async () => {
      const [status, request, step] = await this.redis.hmget(this.goals.keys.goal(goalId), 'status', 'request', 'step');
      if (status) return this.alreadySubmitted(goalId, key, fingerprint, request ?? '', status, step === '0');
      return stored(goalId);
    });
  }

  /** Runs `fn` holding the lease at `lease` (shared/runtime/lease.ts), waiting while another holds it. */
  private async oneAtATime<T>(lease: string, fn: () => Promise<T>): Promise<T> {
    for (const until = Date.now() + 2 * LEASE_MS; ; ) {
      const res = await withLease(this.redis, lease, fn);
      if (!(res && typeof res === 'object' && 'skipped' in res)) return res as T;
      if (Date.now() > until) throw new Error('another submission has held this for a minute: try again');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The id a key stands for now: its first goal's, or past the goals of it the sweep removed. */
  private async keyedGoalId(key: string): Promise<string> {
    const generation = await this.redis.get(this.goals.keys.keyGeneration(goalIdForKey(key)));
    return goalIdForKey(key, Number(generation ?? 0));
  }

  /**
   * The files first, then the goal that names them in one script: no goal is ever seen without
   * its files. A death after the goal leaves a queued goal without its plan job, which the
   * reconciler (in the reflector) adds after its grace period.
   */
  private async store(goalId: string, req: GoalRequest, fingerprint: string): Promise<Submitted> {
    const budgets = { ...this.cfg.budgets, ...stripUndefined(req.budgets) };
    // This call's own mark: its create sent again by ioredis after a lost reply finds its own goal.
    const request = `${fingerprint}:${newOperationId()}`;
    const inputs = await this.storeInputs(goalId, req.files);
    const keyOf = req.key === undefined ? undefined : goalIdForKey(req.key);
    const made = await this.goals.createOrFind(goalId, req.goal, budgets, req.review, { inputs, request, keyOf });
    if (!made.created && made.request !== request) {
      if (req.key === undefined) throw new Error(`goal id ${goalId} is taken (a random id met another): submit again`);
      // Made by a submission running beside this one: its first plan may not be added yet.
      return this.alreadySubmitted(goalId, req.key, fingerprint, made.request, made.status, true);
    }
    await this.queues.addPlan({ goalId, step: 1 });
    // Read after the goal's creation: its createdAt is no later than now.
    if (budgets.maxSeconds !== undefined) await this.queues.addDeadline(goalId, Date.now() + budgets.maxSeconds * 1000);
    return { goalId, created: true };
  }

  /**
   * The VFS's limits, checked before anything is stored: a refused request leaves nothing behind.
   * `held` are the files a goal already has (at a resume) that the inputs do not replace.
   */
  private async checkInputs(files: InputFile[], held = 0): Promise<void> {
    const { maxFilesPerGoal, spillBytes, blobDir } = this.cfg.vfs;
    // Room for one plan's artifacts besides them: a goal full of inputs could write nothing.
    const most = Math.max(0, maxFilesPerGoal - MAX_SUBTASKS - held);
    if (files.length > most) {
      const has = held ? `, it has ${held} besides these` : '';
      throw new ValidationError(
        `${files.length} input files: at most ${most} ` +
          `(a goal holds ${maxFilesPerGoal} files, ${MAX_SUBTASKS} kept for its subtasks${has})`,
      );
    }
    const sizes = files.map((f) => this.vfs.check(f.name, f.content));
    const spilled = files.find((_, i) => sizes[i]! > spillBytes);
    const mismatch = spilled && (await this.vfs.blobStoreMismatch());
    if (!spilled || !mismatch) return;
    const whose =
      mismatch === 'other'
        ? 'belongs to another deployment (another Redis or DEEPQ_PREFIX claimed it). Set DEEPQ_BLOB_DIR ' +
          "to this deployment's store, the services' one, or enqueue it where theirs is"
        : "is not the services' one. Enqueue it where theirs is (a shared filesystem, a service's container)";
    throw new ValidationError(
      `input file ${spilled.name} is over DEEPQ_SPILL_BYTES (${spillBytes}): it goes to the blob store, and ` +
        `${blobDir} (DEEPQ_BLOB_DIR here) ${whose}`,
    );
  }

  /**
   * Inputs as `done` artifacts of `step` (0: the goal starts with them; a resume's: its cycle). One
   * that replaces an artifact is its new version, the old one kept in the history.
   */
  private async storeInputs(goalId: string, files: InputFile[], resume?: { step: number; resumes: number }) {
    const stored: { name: string; bytes: number }[] = [];
    // Each resume call writes as itself: an input given before under the same name, by an earlier
    // resume or by another human's resume racing this one, becomes a version in the history.
    const writer = resume ? `${INPUT_WRITER}-r${resume.resumes}-${newOperationId()}` : INPUT_WRITER;
    for (const f of files) {
      const meta = { status: 'done', step: resume?.step ?? 0, writer, input: true, keepHistory: !!resume } as const;
      stored.push({ name: f.name, bytes: (await this.vfs.write(goalId, f.name, f.content, meta)).bytes });
    }
    return stored;
  }

  /** A goal's files that `files` would not replace (tombstones of deleted ones are none). */
  private async filesBesides(goalId: string, files: InputFile[]): Promise<number> {
    if (!files.length) return 0;
    const given = new Set(files.map((f) => f.name));
    return (await this.vfs.index(goalId)).filter((e) => e.status !== 'evicted' && !given.has(e.name)).length;
  }

  /**
   * A keyed request whose goal exists: the same request is that goal (its first plan job added
   * again while it waits for it: a submission that died before adding it); another one is refused.
   */
  private async alreadySubmitted(
    goalId: string,
    key: string,
    fingerprint: string,
    stored: string,
    status: string,
    beforeFirstPlan: boolean,
  ): Promise<Submitted> {
    if (stored.slice(0, stored.lastIndexOf(':')) !== fingerprint)
      throw new ValidationError(
        `idempotency key ${JSON.stringify(key)} was already used for another request: goal ${goalId} (${status})`,
      );
    if (status === 'queued' && beforeFirstPlan) await this.queues.addPlan({ goalId, step: 1 });
    return { goalId, created: false };
  }

  /**
   * The one follow loop (watch, enqueue --wait, the demo, waitFor): yields each batch of new
   * timeline events with the goal's record, the last one with `settled` set once the goal is
   * terminal (or awaiting a human, unless `stopOnPause` is false). Events that landed with the
   * final status are in the last batch.
   */
  async *follow(goalId: string, opts: FollowOptions = {}): AsyncGenerator<FollowBatch> {
    const deadline = opts.timeoutMs ? Date.now() + opts.timeoutMs : Number.POSITIVE_INFINITY;
    let last = '-';
    const where = redactUrl(this.cfg.redisUrl);
    const giveUp = (err: Error) => Promise.reject(err instanceof RedisLostError ? stoppedFollowing(err, goalId) : err);
    for (let first = true; ; first = false) {
      const read = this.followRead(goalId, last, opts.stopOnPause ?? true);
      const { goal, settled, events } = await answered(this.redis, where, read, opts.redis ?? {}).catch(giveUp);
      if (events.length) last = events[events.length - 1]!.id;
      await opts.onPoll?.(goal);
      if (events.length || settled || first) yield { events, goal, settled };
      if (settled) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for goal ${goalId} (status ${goal.status})`);
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 100));
    }
  }

  /** One look at the goal: its record, whether it is settled, and its events after `last`. */
  private async followRead(goalId: string, last: string, stopOnPause: boolean) {
    const goal = await this.get(goalId);
    const settled = isTerminal(goal.status) || (stopOnPause && goal.status === 'awaiting_human');
    // Read after the status: a settled goal's last events are already written.
    const events = await this.goals.events(goalId, last);
    return { goal, settled, events };
  }

  /** Waits until the goal is terminal or paused for a human; returns its record. */
  async waitFor(goalId: string, opts: FollowOptions = {}): Promise<GoalRecord> {
    for await (const batch of this.follow(goalId, opts)) if (batch.settled) return batch.goal;
    throw new Error(`stopped following goal ${goalId}`);
  }

  /** Stops the goal across all processes; artifacts stay until the TTL sweep. */
  async cancel(goalId: string): Promise<{ cancelled: boolean; status: string }> {
    return inGoalTrace(goalId, 'deepq cancel', { 'deepq.goal.id': goalId }, async () => {
      // Abort running model calls everywhere; remove what still waits.
      const moved = await stopGoal(this.redis, this.cfg, goalId);
      return { cancelled: moved, status: await this.clearStopped(goalId) };
    });
  }

  /** After stopGoal: wakes the goal's paused jobs and removes its waiting ones; its status now. */
  async clearStopped(goalId: string): Promise<string> {
    const g = await this.get(goalId);
    // Jobs waiting for a human are woken instead (their calls cancelled): they end at once as
    // skipped, clearing their pause, rather than at their approval timeout.
    const paused = await releaseApprovals(this, goalId, 'the goal was cancelled');
    const step = Math.max(g.step, g.planStep, 1);
    const removals: Promise<void>[] = [];
    // A time budget's deadline: nothing left for it to end.
    if (g.budgets.maxSeconds !== undefined) {
      removals.push(this.removeJob(MAINTENANCE_QUEUE, deadlineJobId(goalId)));
    }
    // Parked jobs by the goal's own list: a plan job of a resumed goal may have either id.
    const parked = await this.redis.hgetall(this.goals.keys.parked(goalId));
    for (const [id, entry] of Object.entries(parked))
      if (!paused.has(id)) removals.push(this.removeJob(parkedQueue(entry), id));
    for (let s = Math.max(1, step - 1); s <= step + 1; s++) {
      // The reflector queues a resumed goal's next cycles under the plain id; its resume, the -r<n> one.
      removals.push(this.removeJob(PLAN_QUEUE, planJobId(goalId, s)));
      if (g.resumes) removals.push(this.removeJob(PLAN_QUEUE, planJobId(goalId, s, g.resumes)));
      removals.push(this.removeJob(REFLECT_QUEUE, reflectJobId(goalId, s)));
      for (const role of this.cfg.roles)
        for (let i = 0; i < 5; i++) {
          const id = subtaskJobId(goalId, s, i);
          if (!paused.has(id)) removals.push(this.removeJob(subagentQueueName(role.name), id));
        }
    }
    // Each removal is independent (its own job): in flight together, not ~50 round trips in turn.
    await Promise.all(removals);
    return (await this.get(goalId)).status;
  }

  private async removeJob(queue: string, jobId: string): Promise<void> {
    const job = await this.queues.get(queue).getJob(jobId);
    if (!job) return;
    const state = await job.getState();
    if (state === 'waiting' || state === 'delayed' || state === 'prioritized' || state === 'waiting-children') {
      // Children are removed one by one above; finished ones stay as the record of the run.
      await job.remove({ removeChildren: false }).catch(() => {});
    }
  }

  /**
   * Carries on a goal awaiting a human. After a review pause the reflector's decision
   * applies; after an escalation it re-plans. With a note or files it always re-plans: the
   * planner reads the note, and the files are the goal's inputs from then on.
   */
  resume(goalId: string, req: ResumeRequest = {}): Promise<{ status: string; action: string }> {
    // In the goal's trace: the next cycle's plan job (or the woken parked jobs) hang below it.
    const attrs = { 'deepq.goal.id': goalId };
    // With files, one resume at a time: the files go in before the move that may refuse, and a
    // refused resume's files became the current ones under the winner's re-plan. The goal is read
    // again inside, so the later resume is refused before it stores anything.
    const resume = () => this.resumeGoal(goalId, req);
    const run = req.files?.length ? () => this.oneAtATime(this.goals.keys.resumeSubmission(goalId), resume) : resume;
    return inGoalTrace(goalId, 'deepq resume', attrs, run);
  }

  private async resumeGoal(goalId: string, { note, raise = {}, files = [], pause }: ResumeRequest) {
    const g = await this.get(goalId);
    if (g.status !== 'awaiting_human')
      throw new ValidationError(`goal ${goalId} is ${g.status}, not awaiting_human: nothing to resume`);
    refuseIfPausedAgain(g, pause);
    const budgets = raisedBudgets(g, raise);
    if (g.pausedFor === 'budget') {
      refuseReplanAtBudget(goalId, note, files);
      return this.resumeFromBudget(g, budgets, raise);
    }
    const decision = g.reflection?.decision;
    const replan = !!note || files.length > 0;
    if (!replan && g.pausedFor === 'review' && decision === 'end') {
      if (!(await this.lifecycle.approveEnd(goalId, g.step, g.pauses))) throw await this.changedWhileResuming(goalId);
      return { status: 'done', action: 'end' };
    }
    const action = resumeAction(g, note, files);
    // The next cycle must fit the budgets as raised, or the planner would end the goal at once.
    refuseIfOutOfBudget(g, budgets, g.step + 1);
    await this.checkInputs(files, await this.filesBesides(goalId, files));
    // The resume count (the next plan job's id suffix) moves with the status, atomically; a
    // death before the plan job is added is repaired by the reconciler from that count. After
    // an escalation (a stall's too) the stall count starts again.
    const resumes = g.resumes + 1;
    // Before the move: the plan job it is followed by reads them.
    const inputs = await this.storeInputs(goalId, files, { step: g.step, resumes });
    const restart = g.pausedFor === 'escalation' || replan;
    const opts = { note, restart, budgets, raised: raise, inputs, pause: g.pauses };
    if (!(await this.lifecycle.resume(goalId, g.step, action, resumes, opts))) {
      throw await this.changedWhileResuming(goalId, inputs.length > 0);
    }
    await this.queues.addPlan({ goalId, step: g.step + 1 }, resumes);
    const end = timeBudgetEnd({ createdAt: g.createdAt, budgets });
    if (raise.maxSeconds !== undefined && end !== undefined) await this.queues.addDeadline(goalId, end);
    return { status: 'queued', action };
  }

  /**
   * A human judges the work of a goal awaiting them finished: a review or an escalation ends
   * `done` (nothing runs at those pauses). A goal paused at a budget has work in flight: refused.
   */
  async endAsDone(goalId: string, pause?: number): Promise<{ status: string; action: string }> {
    const g = await this.get(goalId);
    if (g.status !== 'awaiting_human')
      throw new ValidationError(`goal ${goalId} is ${g.status}, not awaiting_human: nothing to end`);
    refuseIfPausedAgain(g, pause);
    if (g.pausedFor === 'budget')
      throw new ValidationError(
        `goal ${goalId} is paused at its budget with work in flight: raise the budget to carry on, or cancel it`,
      );
    if (!(await this.lifecycle.approveEnd(goalId, g.step, g.pauses))) {
      throw await this.changedWhileResuming(goalId);
    }
    return { status: 'done', action: 'end' };
  }

  /**
   * A goal paused at a budget carries on from where it stopped: its budgets raised (the one
   * that ran out must be), back to the status it left, its parked jobs woken.
   */
  private async resumeFromBudget(g: GoalRecord, budgets: Budgets, raise: RaisedBudgets) {
    if (!Object.values(raise).some((v) => v !== undefined))
      throw new ValidationError(
        `goal ${g.goalId} is paused at its budget (${g.reason ?? 'a budget ran out'}): ` +
          'resume it with a higher --max-tokens, --max-steps or --max-seconds',
      );
    const ranOut = g.pausedBudget && FLAG_OF[g.pausedBudget];
    // Under its token limit, a goal with too few tokens left for another call is out of tokens too.
    if (ranOut && raise[ranOut.field] === undefined)
      throw new ValidationError(
        `goal ${g.goalId} is paused at its ${ranOut.name} budget (${g.reason ?? 'it ran out'}): ` +
          `raise it with ${ranOut.flag}`,
      );
    refuseIfNoRaise(g, ranOut, raise);
    const to = g.pausedFrom ?? 'queued';
    // The cycle the pause stopped: a pause before planning belongs to the next cycle.
    const cycle = currentCycle({ status: to, step: g.step });
    const nextStep = cycle > g.step ? cycle : undefined;
    refuseIfOutOfBudget(g, budgets, nextStep);
    const resumed = { step: cycle, to, budgets, raised: raise, pause: g.pauses };
    if (!(await this.lifecycle.resumeFromBudget(g.goalId, resumed))) {
      throw await this.changedWhileResuming(g.goalId);
    }
    await promoteParked(this, g.goalId);
    const end = timeBudgetEnd({ createdAt: g.createdAt, budgets });
    if (raise.maxSeconds !== undefined && end !== undefined) await this.queues.addDeadline(g.goalId, end);
    return { status: to, action: 'raise budget' };
  }

  /** What really happened: the goal moved (cancelled, say) while this resume ran. */
  private async changedWhileResuming(goalId: string, filesStored = false): Promise<ValidationError> {
    const now = await this.goals.get(goalId);
    const stored = filesStored ? ' (its files were stored)' : '';
    // Another human resumed it first, and it paused again: this answer was to the pause before.
    const pausedAgain = now?.status === 'awaiting_human' ? `, paused again for ${now.pausedFor ?? 'a human'}` : '';
    return new ValidationError(
      `goal ${goalId} is ${now?.status ?? 'gone'}${pausedAgain} now (it changed while resuming): ` +
        `not resumed${stored}; see \`deepq status ${goalId}\``,
    );
  }

  /**
   * Approves or rejects a call waiting for a human; when it was its job's last one, wakes the
   * job (any worker then resumes it; at a budget pause it parks until the goal is resumed, and
   * `pausedAtBudget` is the goal then). Bad ids and calls decided before are errors that say so.
   */
  decide(
    goalId: string,
    callId: string,
    decision: Extract<ApprovalDecisionStatus, 'approved' | 'rejected'>,
    reason?: string,
  ): Promise<{ record: ApprovalRecord; pendingLeft: number; pausedAtBudget?: GoalRecord }> {
    const attrs = { 'deepq.goal.id': goalId, 'deepq.decision': decision };
    return inGoalTrace(goalId, 'deepq decide', attrs, () => this.decideCall(goalId, callId, decision, reason));
  }

  private async decideCall(
    goalId: string,
    callId: string,
    decision: Extract<ApprovalDecisionStatus, 'approved' | 'rejected'>,
    reason?: string,
  ) {
    if (!GoalIdSchema.safeParse(goalId).success)
      throw new ValidationError(`${JSON.stringify(goalId)} is not a goal id (6-32 lower-case letters or digits)`);
    if (!isCallId(callId))
      throw new ValidationError(`${JSON.stringify(callId)} is not an approval id (ap- and 10 letters or digits)`);
    const d = await this.approvals.decide(goalId, callId, decision, reason);
    if (d.kind === 'no_goal') throw new UnknownGoalError(goalId);
    if (d.kind === 'no_call') throw new ValidationError(`goal ${goalId} has no approval request ${callId}`);
    if (d.kind === 'expired') {
      const r = d.record;
      throw new ValidationError(
        `${callId} timed out at ${new Date(r.expiresAt).toISOString()} (${timeoutReason(r)}): ` +
          'too late to decide, the call is refused by itself',
      );
    }
    if (d.kind === 'decided') {
      const r = d.record;
      const when = r.decidedAt ? ` at ${new Date(r.decidedAt).toISOString()}` : '';
      throw new ValidationError(`${callId} was already decided: ${r.status}${when}${r.reason ? ` (${r.reason})` : ''}`);
    }
    if (d.pendingLeft > 0) return { record: d.record, pendingLeft: d.pendingLeft };
    await promotePaused(this.queues, d.record);
    const goal = await this.goals.get(goalId);
    const pausedAtBudget = goal && isPausedForBudget(goal) ? goal : undefined;
    return { record: d.record, pendingLeft: 0, ...(pausedAtBudget ? { pausedAtBudget } : {}) };
  }

  /** The newest `limit` goals (in `status`, when given), as `deepq goals` shows them. */
  async list(status?: string, limit?: number) {
    const goals = await this.goals.list({ status, limit });
    return goals.map((g) => ({
      goalId: g.goalId,
      status: g.status,
      step: g.step,
      tokens: totalTokens(g.tokens),
      ...costFields(estimateCost(g, this.cfg.prices)),
      ageSeconds: Math.round((Date.now() - g.createdAt) / 1000),
      goal: g.goal.slice(0, 80),
    }));
  }

  async close(): Promise<void> {
    await this.state.close();
  }
}

/** What the user is told when a follow gives up on Redis: the goal itself is not stopped. */
function stoppedFollowing(err: RedisLostError, goalId: string): RedisLostError {
  return new RedisLostError(
    `${err.message}: stopped following goal ${goalId} (the goal is not cancelled: deepq watch ${goalId} ` +
      'follows it again once Redis is back)',
  );
}

/** `goals --json`: the USD cost (null unless every model has a price), its display and the unpriced models. */
function costFields(c: CostEstimate): { costUsd: number | null; cost: string; unpricedModels: string[] } {
  return { costUsd: knownCostUsd(c), cost: formatCost(c), unpricedModels: c.unpriced };
}

/** What a human gives a goal awaiting them: all optional (a plain resume carries on). */
export interface ResumeRequest {
  /** For the planner: the goal re-plans. */
  note?: string;
  raise?: RaisedBudgets;
  /** Files the goal gets as inputs (a new version of an artifact of the same name): it re-plans. */
  files?: InputFile[];
  /** The pause this answers (GoalRecord.pauses, as a page showed it): refused once the goal paused again. */
  pause?: number;
}

/** An answer to a pause the goal has left since (another human answered it, and it paused again). */
function refuseIfPausedAgain(g: GoalRecord, pause: number | undefined): void {
  if (pause === undefined || pause === g.pauses) return;
  throw new ValidationError(
    `goal ${g.goalId} paused again (for ${g.pausedFor ?? 'a human'}) since the pause this answers: ` +
      'not resumed; look at it again',
  );
}

/** What a resume does (its `resumed` event's action): after a review, the reflector's decision. */
function resumeAction(g: GoalRecord, note: string | undefined, files: InputFile[]): string {
  if (note) return 'replan with note';
  if (files.length) return 'replan with files';
  return g.pausedFor === 'review' ? (g.reflection?.decision ?? 'continue') : 'replan';
}

/** A goal paused at a budget carries on mid-cycle: no planner would read a note or files now. */
function refuseReplanAtBudget(goalId: string, note: string | undefined, files: InputFile[]): void {
  if (!note && !files.length) return;
  const what = note ? 'a --note' : 'a --file';
  throw new ValidationError(
    `goal ${goalId} is paused at its budget and carries on from where it stopped: ${what} is for a ` +
      'review or an escalation (resume with a higher budget alone)',
  );
}

/** Budgets raised at a resume: tokens and steps are new limits, seconds are counted from now. */
export type RaisedBudgets = Pick<Budgets, 'maxTokens' | 'maxSteps' | 'maxSeconds'>;

/** The goal's budgets with the raised ones; a "raise" below what is already used is refused. */
export function raisedBudgets(g: GoalRecord, raise: RaisedBudgets, now = Date.now()): Budgets {
  const used = totalTokens(g.tokens);
  if (raise.maxTokens !== undefined && raise.maxTokens <= used)
    throw new ValidationError(`--max-tokens ${raise.maxTokens} is not above the ${used} tokens the goal has used`);
  if (raise.maxTokens !== undefined) refuseIfNoRoomForPausedCall(g, raise.maxTokens, used);
  // No model call is made with less room than this: the goal would pause again at its first one.
  if (raise.maxTokens !== undefined && raise.maxTokens < used + MIN_CALL_TOKENS)
    throw new ValidationError(
      `--max-tokens ${raise.maxTokens} leaves ${raise.maxTokens - used} tokens above the ${used} used: ` +
        `a model call needs at least ${MIN_CALL_TOKENS}`,
    );
  if (raise.maxSteps !== undefined && raise.maxSteps <= g.step)
    throw new ValidationError(`--max-steps ${raise.maxSteps} is not above the ${g.step} cycle(s) the goal has run`);
  // The CLI's flag has this bound; the inspector's form and other callers come through here too.
  if (raise.maxSeconds !== undefined && raise.maxSeconds > MAX_BUDGET_SECONDS)
    throw new ValidationError(`--max-seconds ${raise.maxSeconds} is more than ten years (${MAX_BUDGET_SECONDS})`);
  // Wall-clock time spent waiting for a human is nobody's work: seconds are given from now.
  const elapsed = (now - g.createdAt) / 1000;
  const maxSeconds = raise.maxSeconds === undefined ? undefined : Math.ceil(elapsed + raise.maxSeconds);
  refuseLowered(g.budgets, { ...raise, maxSeconds }, elapsed);
  return { ...g.budgets, ...stripUndefined({ maxTokens: raise.maxTokens, maxSteps: raise.maxSteps, maxSeconds }) };
}

/** A resume raises budgets (a missing zero would end the goal early): one below the goal's own is refused. */
function refuseLowered(budgets: Budgets, raised: RaisedBudgets, elapsed: number): void {
  const below = (field: keyof RaisedBudgets) =>
    raised[field] !== undefined && budgets[field] !== undefined && raised[field] < budgets[field];
  if (below('maxTokens'))
    throw new ValidationError(`--max-tokens ${raised.maxTokens} is below the goal's budget of ${budgets.maxTokens}`);
  if (below('maxSteps'))
    throw new ValidationError(
      `--max-steps ${raised.maxSteps} is below the goal's budget of ${budgets.maxSteps} cycles`,
    );
  if (below('maxSeconds')) {
    const left = Math.max(0, budgets.maxSeconds! - elapsed).toFixed(0);
    throw new ValidationError(`--max-seconds gives the goal less time than its budget leaves it (${left} s)`);
  }
}

/**
 * The call the goal paused at goes out first when it carries on: a raise must leave it room, or
 * the goal pauses again at once. (A "raise" that is none is refused, as such, at the budget resume.)
 */
function refuseIfNoRoomForPausedCall(g: GoalRecord, maxTokens: number, used: number): void {
  const need = g.pausedFor === 'budget' && g.pausedNeed ? g.pausedNeed : 0;
  if (maxTokens <= (g.budgets.maxTokens ?? 0) || need <= MIN_CALL_TOKENS || maxTokens >= used + need) return;
  throw new ValidationError(
    `--max-tokens ${maxTokens} leaves ${Math.max(0, maxTokens - used)} tokens above the ${used} used: ` +
      `the call the goal paused at needs about ${need} (give at least ${used + need})`,
  );
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The budget a goal paused at, given again no higher than it was (a typo, or a "raise" that
 * lowers it): the goal would pause again at once, after a resume said it carried on.
 */
function refuseIfNoRaise(
  g: GoalRecord,
  ranOut: (typeof FLAG_OF)[keyof typeof FLAG_OF] | null | undefined,
  raise: RaisedBudgets,
) {
  // Seconds are given from now: any value is more time than a goal past its deadline has.
  if (!ranOut || ranOut.field === 'maxSeconds') return;
  const now = g.budgets[ranOut.field];
  const given = raise[ranOut.field];
  if (now === undefined || given === undefined || given > now) return;
  throw new ValidationError(
    `${ranOut.flag} ${given} is not above the goal's ${ranOut.name} budget (${now}) it paused at: give a higher one`,
  );
}

/** Each budget's field and the resume flag that raises it. */
const FLAG_OF = {
  tokens: { field: 'maxTokens', flag: '--max-tokens', name: 'token' },
  steps: { field: 'maxSteps', flag: '--max-steps', name: 'step' },
  seconds: { field: 'maxSeconds', flag: '--max-seconds', name: 'time' },
} as const;

/** Refuses a resume whose next cycle would be out of budget, naming the flag that raises it. */
function refuseIfOutOfBudget(g: GoalRecord, budgets: Budgets, nextStep: number | undefined): void {
  const still = budgetProblem({ ...g, budgets }, { nextStep });
  if (!still) return;
  const flag = FLAG_OF[still.kind].flag;
  throw new ValidationError(`goal ${g.goalId} is still out of budget (${still.reason}): raise it with ${flag}`);
}
