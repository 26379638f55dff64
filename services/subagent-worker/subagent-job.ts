// A subagent job: run the role's agent on a fresh message list (P52), write the artifact
// to the virtual FS, return a small SubagentResult without content or transcript.
import { type Job, type Queue, UnrecoverableError } from 'bullmq';
import type { Logger } from 'pino';
import { type AgentCheckpoint, ApprovalPause, approvalGate } from '../../shared/agent/approval.ts';
import { type AgentRun, checkpointBeforeFailedCall } from '../../shared/agent/create-agent.ts';
import { contractFor, type OutputContract } from '../../shared/agent/output-contracts.ts';
import { ModelCallError } from '../../shared/agent/providers/types.ts';
import type { RoleSpec } from '../../shared/agent/roles.ts';
import { type GoalRunOutcome, runForGoal } from '../../shared/agent/run-for-goal.ts';
import { createSandboxTools, createVfsTools, type Tool, type ToolScope } from '../../shared/agent/tools.ts';
import { shortId, storeTranscript, type TranscriptWrite } from '../../shared/agent/transcripts.ts';
import { ErrorCode, hasCode, ProviderRateLimitError, VfsLimitError } from '../../shared/errors.ts';
import type { JobCheckpoint } from '../../shared/goal/approvals.ts';
import { CheckpointWriter } from '../../shared/goal/checkpoints.ts';
import type { TimelineEventBody } from '../../shared/goal/events.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import { isPausedForBudget, parkForBudget } from '../../shared/goal/parking.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import type { GoalBrief, ToolProgress } from '../../shared/goal/store.ts';
import { finishedArtifact, unfinishedWorkingCopy } from '../../shared/goal/subtask-artifact.ts';
import {
  goalBriefOfJob,
  parseJobData,
  type SubagentJob,
  type SubagentJobResult,
  SubagentJobSchema,
} from '../../shared/runtime/jobs.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { cutText } from '../../shared/text.ts';
import type { FileEntry, WriteMeta } from '../../shared/vfs/vfs.ts';
import { endPaused, type PausedJob, pauseForApproval, type Resumed, takeDecisions } from './approval.ts';
import { clearRateLimitRequeues, putBackForRateLimit } from './rate-limited.ts';
import { noteRunTokens } from './run-tokens.ts';
import { buildSubagentTask } from './task.ts';

export interface SubagentDeps {
  rt: Runtime;
  role: RoleSpec;
  /** The role's queue, paused fleet-wide on a provider 429. */
  queue: Queue;
  /** Tools beyond the built-in VFS ones (the role's MCP tools), bound to the job. */
  extraTools?: (scope: ToolScope, signal?: AbortSignal) => Tool[];
}

type ResultBase = Pick<SubagentJobResult, 'artifact_name' | 'role' | 'threadId' | 'bytes' | 'startedAt'>;

function skippedResult(base: ResultBase, notes: string, skipped: string): SubagentJobResult {
  return { ...base, status: 'failed', notes: cutText(notes, 200), finishedAt: Date.now(), skipped };
}

export async function processSubagentJob(
  deps: SubagentDeps,
  job: Job,
  signal?: AbortSignal,
  token?: string,
): Promise<SubagentJobResult> {
  const { rt, role } = deps;
  const data = parseJobData(SubagentJobSchema, job.data, 'subagent job payload');
  if (data.role !== role.name) {
    throw new UnrecoverableError(`job is for role ${data.role}, this worker serves ${role.name}`);
  }
  const { goalId, step } = data;
  const { saved, goal, threadId, finished } = await openJob(rt, job, data, role.name);
  const base: ResultBase = {
    artifact_name: data.expected_artifact,
    role: role.name,
    threadId,
    bytes: 0,
    startedAt: saved?.startedAt ?? Date.now(),
  };
  const log = rt.logger.child({ goalId, step, role: role.name, threadId, jobId: job.id });
  const startedAt = base.startedAt;
  const tokens = saved?.tokens ?? 0;
  const paused: PausedJob = {
    rt,
    job,
    token,
    data,
    threadId,
    startedAt,
    log,
    tokens,
    checkpoints: new CheckpointWriter(),
    checkpointStored: saved !== null,
  };
  if (finished) return finishedEarlier(paused, base, finished, saved);
  if (isTerminal(goal.status)) {
    if (saved) await endPaused(paused, saved, goal.status);
    return skippedResult(base, `skipped: goal is ${goal.status}`, goal.status);
  }
  // The goal waits for a human to raise a budget: this subtask waits with it, parked.
  if (isPausedForBudget(goal)) return parkForBudget(rt, job, token, goalId);
  const resume = saved ? await resumeFrom(paused, saved) : undefined;
  const result = await runSubtask(deps, paused, goal, base, resume, signal);
  // The job finished: its pause is over (its artifact's write took it, else it goes now). A failed
  // attempt keeps it: the retry resumes from it.
  if (paused.checkpointStored) await rt.approvals.clearCheckpoint(goalId, String(job.id));
  return result;
}

/**
 * A delivery of a job whose run recorded its artifact already (the lock was lost before BullMQ
 * stored the return, and the stalled check handed the job out again): its result, not a new run.
 */
async function finishedEarlier(
  p: PausedJob,
  base: ResultBase,
  entry: FileEntry,
  saved: JobCheckpoint | null,
): Promise<SubagentJobResult> {
  if (saved) await p.rt.approvals.clearCheckpoint(p.data.goalId, String(p.job.id));
  p.log.info({ bytes: entry.bytes }, 'subtask finished in an earlier delivery: not run again');
  const threadId = entry.threadId ?? base.threadId;
  // The run's own start is not known here; never after its end.
  const startedAt = Math.min(base.startedAt, entry.updatedAt);
  return { ...base, threadId, startedAt, status: 'done', notes: null, bytes: entry.bytes, finishedAt: entry.updatedAt };
}

interface OpenedJob {
  saved: JobCheckpoint | null;
  goal: GoalBrief;
  threadId: string;
  /** The artifact an earlier delivery of this job recorded `done`. */
  finished?: FileEntry | null;
}

/**
 * The job's start: the goal's brief, a paused run's checkpoint, and (not for a resumed run) its
 * subtask_started event for a goal that goes on. A job paused for approval goes on under its own
 * thread id, from its saved messages; only a run of this job saves a checkpoint, so a first
 * start reads none, and its event lands with the brief read (one script). A later start also
 * reads whether an earlier delivery finished the subtask.
 */
async function openJob(rt: Runtime, job: Job, data: SubagentJob, role: string): Promise<OpenedJob> {
  const { goalId, step, index } = data;
  const started = (threadId: string, restarted = false): TimelineEventBody => {
    const ref = { step, index, role, artifact: data.expected_artifact, threadId };
    return { type: 'subtask_started', ...ref, attempt: job.attemptsMade + 1, ...(restarted ? { restarted } : {}) };
  };
  if (job.attemptsStarted === 1) {
    const threadId = threadIdFor(goalId, role, shortId());
    return { saved: null, goal: await goalBriefOfJob(rt.goals, goalId, started(threadId)), threadId };
  }
  // The reads go out back to back (one round trip).
  const [saved, goal, finished] = await Promise.all([
    rt.approvals.checkpoint(goalId, String(job.id)),
    goalBriefOfJob(rt.goals, goalId),
    finishedArtifact(rt.vfs, data, String(job.id)),
  ]);
  const threadId = saved?.threadId ?? threadIdFor(goalId, role, shortId());
  if (finished) return { saved, goal, threadId, finished };
  const goesOn = !isTerminal(goal.status) && !isPausedForBudget(goal);
  // A new attempt after a failed one shows on the timeline, also when it goes on from where the
  // failed one stopped (a resume after a pause or a 429 is the same attempt).
  const newAttempt = !saved || saved.failedAttempt === job.attemptsMade;
  // BullMQ counts every start. A run put back on purpose (a 429, an approval, a budget) or failed
  // leaves a checkpoint; more starts than attempts and none, or only a running run's progress: a
  // run of this attempt did not finish (its process died), and this one goes on from its last tool call.
  const restarted = saved ? saved.running === true : job.attemptsStarted > job.attemptsMade + 1;
  if ((newAttempt || restarted) && goesOn) await rt.goals.appendEvent(goalId, started(threadId, restarted));
  return { saved, goal, threadId };
}

/** A paused run's way on: with the decisions on its calls, or (stopped at the budget, no calls) as it was. */
function resumeFrom(paused: PausedJob, saved: JobCheckpoint): Promise<Resumed> | Resumed {
  if (saved.calls.length === 0) return { agent: saved.agent, decisions: new Map(), saved };
  return takeDecisions(paused, saved);
}

/** Runs the role's agent (fresh, or from a paused run's checkpoint) and records what came of it. */
async function runSubtask(
  deps: SubagentDeps,
  p: PausedJob,
  goal: GoalBrief,
  base: ResultBase,
  resume: Resumed | undefined,
  signal?: AbortSignal,
): Promise<SubagentJobResult> {
  const { rt, role } = deps;
  const { data, threadId, log, job } = p;
  const { goalId, step, index } = data;
  const contract = contractFor(role.contract);
  let res: GoalRunOutcome<unknown>;
  try {
    res = await runForGoal<unknown>(rt, {
      spec: role,
      goal,
      // A resumed run's task is in its saved messages already.
      task: resume ? '' : await buildSubagentTask(rt, data),
      tools: jobTools(deps, { ...jobScope(p), role: role.name }, signal, log),
      toolCalled: (call) => ({ type: 'tool_called', step, index, role: role.name, threadId, ...call }),
      contract,
      ctx: {
        role: role.name,
        kind: 'subagent',
        goalId,
        step,
        threadId,
        signal,
        subject: { goal: goal.goal, instruction: data.instruction },
      },
      log,
      rateLimitToQueue: true,
      approval: approvalGate(role.approval, resume?.decisions),
      resume: resume?.agent,
      onResumedTurn: resume && ((agent) => saveConversation(p, agent, resume.saved)),
      progress: (agent) => progressOf(p, agent, resume?.saved),
      tokenCap: data.token_cap,
      transcriptWithResult: true,
      onTokens: (n) => {
        // A call answered: any 429s before it no longer count toward the put-backs in a row.
        clearRateLimitRequeues(job, log);
        p.tokens = (p.tokens ?? 0) + n;
      },
    });
  } catch (err) {
    // A failed attempt's tokens go with its error to the final-failure hook.
    noteRunTokens(err, p.tokens ?? 0);
    if (!(err instanceof ApprovalPause)) {
      // A call answered 429, or failing past its retries: the job's next start goes on from that turn.
      // Else, an attempt that failed by itself after a tool call: its retry goes on from that call.
      const before =
        checkpointBeforeFailedCall(err) ?? (failedOnItsOwn(err, signal) ? callsDone(p.progress) : undefined);
      if (before) await saveConversation(p, before, resume?.saved, job.attemptsMade + 1);
      return handleRunError(deps, p, base, err);
    }
    const status = await pauseForApproval(p, err); // throws DelayedError unless the goal ended
    return skippedResult(base, `skipped: goal is ${status}`, status);
  }
  return afterRun(rt, p, base, res, contract);
}

/**
 * Saves the run's conversation as the job's checkpoint, for its next start to go on from: after
 * a decided turn's tools ran (a retry must not run an approved call again), before a call
 * answered 429 (nor ask every earlier turn again), at a budget pause. A resumed job keeps its
 * checkpoint's calls and marks, their decisions counted once.
 */
async function saveConversation(
  p: PausedJob,
  agent: AgentCheckpoint,
  resumed?: JobCheckpoint,
  failedAttempt?: number,
): Promise<void> {
  const base = resumed ?? { threadId: p.threadId, startedAt: p.startedAt, calls: [] };
  const cp: JobCheckpoint = { ...base, agent, tokens: p.tokens, failedAttempt };
  await p.rt.approvals.saveCheckpoint(p.data.goalId, String(p.job.id), cp, p.checkpoints);
}

/**
 * The job's checkpoint after a tool call of its run (its lock must still be the run's to store it):
 * marked `running`, a next start knows the run did not end on purpose (its process died, or a
 * shutdown's drain timed out) and goes on from it, the calls done not run again.
 */
function progressOf(p: PausedJob, agent: AgentCheckpoint, resumed?: JobCheckpoint): ToolProgress {
  p.progress = agent;
  p.checkpointStored = true;
  const base = resumed ?? { threadId: p.threadId, startedAt: p.startedAt, calls: [] };
  const cp: JobCheckpoint = { ...base, agent, tokens: p.tokens, failedAttempt: undefined, running: true };
  const lock = { key: `${p.job.queueQualifiedName}:${p.job.id}:lock`, token: p.token ?? '' };
  p.checkpoints ??= new CheckpointWriter();
  const writer = p.checkpoints;
  return { jobId: String(p.job.id), checkpoint: writer.next(cp), lock, unstored: () => writer.unstored() };
}

/**
 * The progress a failed attempt's retry goes on from. A mark of an at-most-once call started is
 * dropped: such a call returns its failure as its result, so an attempt failing after the mark
 * failed in the mark's own write, and the call was never made (the retry makes it).
 */
function callsDone(progress: AgentCheckpoint | undefined): AgentCheckpoint | undefined {
  if (progress?.started === undefined) return progress;
  const { started: _notMade, ...done } = progress;
  return done;
}

/** An attempt that failed by itself: not aborted (a cancel, a shutdown), not taken over by another worker. */
function failedOnItsOwn(err: unknown, signal?: AbortSignal): boolean {
  const aborted = signal?.aborted || (err instanceof ModelCallError && err.kind === 'aborted');
  return !aborted && !hasCode(err, ErrorCode.LockLost);
}

/** Records the run's artifact; a run the budget stopped is skipped, or parked with its messages. */
async function afterRun(
  rt: Runtime,
  p: PausedJob,
  base: ResultBase,
  res: GoalRunOutcome<unknown>,
  contract: OutputContract,
): Promise<SubagentJobResult> {
  const { data, job, token } = p;
  if (res.kind === 'over_budget') return skippedResult(base, res.reason, 'budget_exceeded');
  if (res.kind === 'stopped') return skippedResult(base, `skipped: ${res.reason}`, res.status);
  if (res.kind === 'paused') {
    await saveConversation(p, res.checkpoint);
    return parkForBudget(rt, job, token, data.goalId);
  }
  const transcript = res.kind === 'ok' ? res.transcript : undefined;
  // An accepted answer is stored as its contract says (a code block as the code it holds).
  const content = res.run.ok ? (contract.artifact?.(res.run.value) ?? res.run.text) : res.run.text;
  // The artifact's write ends the run: the job's checkpoint goes with it, not in a call of its own.
  const endsCheckpointOf = content && p.checkpointStored ? String(job.id) : undefined;
  const recorded = { run: res.run, content, transcript, base, tokens: p.tokens, endsCheckpointOf };
  const result = await recordResult(rt, data, jobScope(p), recorded, p.log);
  if (endsCheckpointOf) p.checkpointStored = false;
  return result;
}

/**
 * Where the job's writes go, as whom: its goal, step and thread, the job id as writer, and (run by
 * a worker) the job's lock, so that a write after another worker took the job is refused.
 */
function jobScope(p: PausedJob): Omit<ToolScope, 'role'> {
  const { data, job, token, threadId } = p;
  const writer = String(job.id);
  const lock = token ? { lock: { key: `${job.queueQualifiedName}:${job.id}:lock`, token } } : {};
  return { goalId: data.goalId, step: data.step, threadId, writer, artifact: data.expected_artifact, ...lock };
}

/**
 * The job's tools: the role's built-in ones bound to the job, then the ones extraTools adds
 * (its MCP tools). A name offered twice keeps the first: the model sees each name once.
 */
function jobTools(deps: SubagentDeps, scope: ToolScope, signal: AbortSignal | undefined, log: Logger): Tool[] {
  const { rt, role } = deps;
  const tools = createVfsTools(rt.vfs, scope, role.tools, {
    // A read_file page stays under the agent loop's cut of tool results.
    pageMaxChars: Math.max(1000, rt.cfg.vfs.toolResultMaxChars - 1000),
    signal,
    log,
  });
  // run_code / run_tests, in the role's sandbox, when the role lists them.
  const sandbox = { vfs: rt.vfs, limits: role.sandbox, metrics: rt.metrics };
  tools.push(...createSandboxTools(sandbox, scope, role.tools, { signal, log }));
  const names = new Set(tools.map((t) => t.def.name));
  for (const t of deps.extraTools?.(scope, signal) ?? []) {
    if (names.has(t.def.name)) {
      log.warn({ tool: t.def.name }, 'a tool name is offered twice: the first one is kept');
      continue;
    }
    names.add(t.def.name);
    tools.push(t);
  }
  return tools;
}

/**
 * Writes the artifact (failed runs keep what they wrote, marked failed) with the event and an
 * accepted run's transcript, in one script; a run that wrote nothing stores them on their own.
 */
async function recordResult(
  rt: Runtime,
  data: SubagentJob,
  who: Pick<ToolScope, 'writer' | 'lock'>,
  r: {
    run: AgentRun;
    content: string;
    transcript?: TranscriptWrite;
    base: ResultBase;
    tokens?: number;
    endsCheckpointOf?: string;
  },
  log: Logger,
): Promise<SubagentJobResult> {
  const { run, transcript, base } = r;
  const { goalId, step, index } = data;
  // A run stopped at its token cap keeps what it had: unfinished (`active`), marked partial.
  const status = run.ok ? 'done' : run.partial ? 'active' : 'failed';
  const retried = run.contractRetries ? 'accepted after one contract retry' : null;
  const notes = run.ok ? retried : cutText(run.problem ?? 'failed', 200);
  const bytes = Buffer.byteLength(r.content, 'utf8');
  const partial = run.partial ? { partial: true } : {};
  const result: SubagentJobResult = { ...base, status, notes, bytes, finishedAt: Date.now(), ...partial };
  const event: TimelineEventBody = {
    type: run.ok || run.partial ? 'subtask_finished' : 'subtask_failed',
    step,
    index,
    role: base.role,
    artifact: data.expected_artifact,
    threadId: base.threadId,
    bytes,
    ms: result.finishedAt - base.startedAt,
    ...(r.tokens === undefined ? {} : { tokens: r.tokens }),
    ...(notes ? { reason: notes } : {}),
    ...partial,
  };
  // A run that ends unfinished with no text of its own records its tool-written working copy
  // (a revision's then goes to the history and the done version it was to revise is current).
  const unfinished = status !== 'done' && !r.content;
  const content = unfinished ? await unfinishedWorkingCopy(rt.vfs, data, who.writer) : r.content;
  if (content) {
    // A revision (a new version of a done artifact) keeps the old version in the history; one
    // that did not finish leaves the done version current (its output goes to the history).
    const keep = status === 'done' ? { keepHistory: true } : { keepDone: true };
    const { writer, lock } = who;
    const ends = r.endsCheckpointOf ? { endsCheckpointOf: r.endsCheckpointOf } : {};
    const meta: WriteMeta = { status, step, role: base.role, threadId: base.threadId, writer, lock, ...keep, ...ends };
    // A refused write still stores the transcript (VirtualFs.write): the run happened. A refusal
    // another attempt would meet again (the goal's file count, a done artifact, the name) ends the
    // job now rather than running the whole agent once per attempt first.
    await rt.vfs.write(goalId, data.expected_artifact, content, { ...meta, event, transcript }).catch((err) => {
      throw err instanceof VfsLimitError && err.permanent ? new UnrecoverableError(err.message) : err;
    });
  } else {
    if (transcript) await storeTranscript(rt, transcript);
    await rt.goals.appendEvent(goalId, event);
  }
  log.info({ status, bytes, turns: run.turns }, 'subtask finished');
  return result;
}

/**
 * A 429 pauses the role's whole queue (fleet flow control) and puts the job back untouched;
 * an abort of a goal that ended returns quietly; anything else fails the attempt.
 */
async function handleRunError(
  deps: SubagentDeps,
  p: PausedJob,
  base: ResultBase,
  err: unknown,
): Promise<SubagentJobResult> {
  const { rt } = deps;
  const { job, token, log } = p;
  if (err instanceof ProviderRateLimitError) return putBackForRateLimit(deps, job, token, err, log);
  if (err instanceof ModelCallError && err.kind === 'aborted') {
    const g = await rt.goals.get(job.data.goalId);
    if (g && isTerminal(g.status)) return skippedResult(base, `aborted: goal is ${g.status}`, g.status);
  }
  throw err;
}
