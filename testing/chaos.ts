// Chaos for deepq: a fleet with several processes per service, a loop that SIGKILLs a random
// one every interval and restarts it with the same arguments, and a verifier that checks
// every goal ended `done` with each expected artifact exactly once and complete. Used by
// tests/system/chaos-kill-workers.int.test.ts (CI size) and scripts/chaos.ts (the large run).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { buildSubagentTask } from '../services/subagent-worker/task.ts';
import { artifactOfAnswer, contractFor } from '../shared/agent/output-contracts.ts';
import { ScriptedProvider } from '../shared/agent/providers/scripted.ts';
import { responseText } from '../shared/agent/providers/types.ts';
import type { SubtaskOutcomeRef, SubtaskRef, TimelineEvent } from '../shared/goal/events.ts';
import { isTerminal } from '../shared/goal/status.ts';
import { loadConfig } from '../shared/runtime/config.ts';
import type { SubagentJob } from '../shared/runtime/jobs.ts';
import {
  PLAN_QUEUE,
  planJobId,
  REFLECT_QUEUE,
  reflectJobId,
  subagentQueueName,
  subtaskJobId,
} from '../shared/runtime/queues.ts';
import { type FaultCounts, type FaultOptions, startFaults } from './chaos-faults.ts';
import { type Fleet, type ServiceProc, startFleet, startProcess } from './fleet.ts';
import { prng } from './prng.ts';

export interface ChaosOptions {
  goals: number;
  /** Processes per service: planner, reflector and each role's worker. */
  replicas: number;
  /** Also replicate planner and reflector (default true). */
  replicateAll?: boolean;
  killEveryMs: number;
  latencyMs: number;
  /** BullMQ lock duration and stalled-check interval (DEEPQ_LOCK_DURATION_MS, DEEPQ_STALLED_INTERVAL_MS). */
  lockDurationMs: number;
  stalledIntervalMs: number;
  /** Enqueue the goals evenly over this time, so kills land throughout the run. */
  enqueueSpreadMs: number;
  /** Give up waiting for the goals after this long (they are then reported as lost). */
  timeoutMs: number;
  concurrency?: number;
  seed?: number;
  /** Lost replies, connection cuts and a Redis restart through a fault proxy (testing/chaos-faults.ts). */
  faults?: FaultOptions;
  /** Restarts the caller's Redis (for `faults.restartAtMs`). */
  restartRedis?: (downMs: number) => Promise<void>;
  log?: (line: string) => void;
}

export interface ChaosReport {
  goals: number;
  done: number;
  /** Goals that did not end `done`, or whose artifacts are missing, wrong or incomplete. */
  lost: number;
  /**
   * Side effects that happened twice: an artifact at version > 1, an extra artifact name,
   * a goal finished twice, a cycle reflected twice, a subtask run started or ended twice.
   */
  duplicates: number;
  /** Goals that needed an extra cycle because a subtask failed for good (recovered, not lost). */
  replanned: number;
  kills: number;
  restarts: number;
  /** Processes that exited without being killed by the chaos loop (must be none). */
  unexpectedExits: { name: string; code: number | null; signal: string | null; tail: string }[];
  reExecutions: {
    /** Subtask runs beyond the first per (goal, step, index): subtask_started events. */
    subtasks: number;
    /** BullMQ job starts beyond the first (attemptsStarted - 1), per queue kind. */
    jobs: { plan: number; reflect: number; subagent: number };
    /** Times a job's lock expired and the stalled check put it back (stalledCounter). */
    stalled: number;
    /** Jobs that failed for good (a job whose process died more than maxStalledCount times while holding it). */
    failedJobs: number;
    /** Cycles dispatched again by a re-delivered plan job (idempotent: same job ids). */
    redispatches: number;
  };
  problems: string[];
  failures: string[];
  /** What the fault proxy did, when the run had faults. */
  faults?: FaultCounts;
  wallSeconds: number;
  settings: Omit<ChaosOptions, 'log'> & { seed: number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ChaosLoop {
  kills: number;
  restarts: number;
  unexpectedExits: ChaosReport['unexpectedExits'];
  /** Stops killing; resolves once the last restart was spawned. */
  stop(): Promise<void>;
}

/**
 * Every `killEveryMs`, SIGKILLs one of the fleet's processes chosen at random (booting ones
 * included) and starts it again with the same name and arguments. The fleet's process list
 * is updated in place, so `fleet.stop()` stops the replacements.
 */
export function startChaos(
  fleet: Fleet,
  opts: { killEveryMs: number; seed: number; log?: (s: string) => void },
): ChaosLoop {
  const rand = prng(opts.seed);
  const killed = new WeakSet<ServiceProc['proc']>();
  let stopping = false;
  const state: ChaosLoop = {
    kills: 0,
    restarts: 0,
    unexpectedExits: [],
    stop: async () => {
      stopping = true;
      await loop;
    },
  };
  const watch = (p: ServiceProc) => {
    p.proc.once('exit', (code, signal) => {
      if (killed.has(p.proc) || stopping) return;
      state.unexpectedExits.push({ name: p.name, code, signal, tail: p.output().slice(-2000) });
      opts.log?.(`chaos: ${p.name} exited by itself (${signal ?? code})`);
    });
  };
  fleet.procs.forEach(watch);
  const loop = (async () => {
    while (!stopping) {
      await sleep(opts.killEveryMs);
      if (stopping) break;
      const i = Math.floor(rand() * fleet.procs.length);
      const victim = fleet.procs[i]!;
      if (victim.proc.exitCode === null && victim.proc.signalCode === null) {
        killed.add(victim.proc);
        const exited = once(victim.proc, 'exit');
        victim.proc.kill('SIGKILL');
        state.kills++;
        await exited;
      }
      // Every kill is followed by its restart, even when the loop is told to stop meanwhile.
      const next = startProcess(victim.name, victim.args, fleet.env);
      watch(next);
      fleet.procs[i] = next;
      state.restarts++;
    }
  })();
  return state;
}

/** The fleet the chaos runs against: `replicas` processes per service. */
export async function startChaosFleet(
  redisUrl: string,
  opts: Pick<
    ChaosOptions,
    'replicas' | 'replicateAll' | 'latencyMs' | 'lockDurationMs' | 'stalledIntervalMs' | 'concurrency'
  >,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<Fleet> {
  return startFleet(
    redisUrl,
    {
      DEEPQ_SCRIPTED_LATENCY_MS: String(opts.latencyMs),
      DEEPQ_LOCK_DURATION_MS: String(opts.lockDurationMs),
      DEEPQ_STALLED_INTERVAL_MS: String(opts.stalledIntervalMs),
      ...extraEnv,
    },
    { replicas: opts.replicas, replicateAll: opts.replicateAll ?? true, concurrency: opts.concurrency },
  );
}

/** Waits until every goal is terminal or paused, or the deadline passes. */
export async function waitForGoals(fleet: Fleet, goalIds: string[], timeoutMs: number): Promise<Map<string, string>> {
  const deadline = Date.now() + timeoutMs;
  const status = new Map<string, string>();
  for (;;) {
    const pipe = fleet.client.redis.pipeline();
    for (const id of goalIds) pipe.hget(fleet.client.goals.keys.goal(id), 'status');
    const res = (await pipe.exec()) ?? [];
    for (const [i, id] of goalIds.entries()) status.set(id, String(res[i]?.[1] ?? 'missing'));
    const open = [...status.values()].filter((s) => !isTerminal(s) && s !== 'awaiting_human').length;
    if (open === 0 || Date.now() > deadline) return status;
    await sleep(200);
  }
}

/** The states of a job still to run or running. */
const LIVE_JOB_STATES = ['active', 'waiting', 'delayed', 'prioritized', 'waiting-children'] as const;

/** The live jobs of these goals, as `<queue>/<job id> (<state>)`. */
async function liveJobs(fleet: Pick<Fleet, 'client' | 'cfg'>, goalIds: Set<string>): Promise<string[]> {
  const queues = [PLAN_QUEUE, REFLECT_QUEUE, ...fleet.cfg.roles.map((r) => subagentQueueName(r.name))];
  const out: string[] = [];
  for (const name of queues) {
    const queue = fleet.client.queues.get(name);
    for (const state of LIVE_JOB_STATES) {
      for (const job of await queue.getJobs([state], 0, -1)) {
        if (job && goalIds.has(job.data?.goalId)) out.push(`${name}/${job.id} (${state})`);
      }
    }
  }
  return out;
}

/**
 * After the goals' statuses are final, their jobs may still run: a job whose process was killed
 * near the end comes back once its lock expires and the stalled check sees it. Waits until no
 * job of these goals is live, for at most `boundMs`; returns the jobs still live then.
 */
export async function waitForJobsToSettle(
  fleet: Pick<Fleet, 'client' | 'cfg'>,
  goalIds: string[],
  boundMs: number,
): Promise<string[]> {
  const deadline = Date.now() + boundMs;
  const ours = new Set(goalIds);
  for (;;) {
    const live = await liveJobs(fleet, ours);
    if (live.length === 0 || Date.now() >= deadline) return live;
    await sleep(250);
  }
}

/**
 * How long a late re-delivery can take to settle: the lock of a killed process's job expires,
 * the stalled check (up to two intervals) puts it back, and it runs again (a restarted process
 * boots, the model answers).
 */
export function settleBoundMs(opts: Pick<ChaosOptions, 'lockDurationMs' | 'stalledIntervalMs' | 'latencyMs'>): number {
  return opts.lockDurationMs + 2 * opts.stalledIntervalMs + 10_000 + 10 * opts.latencyMs;
}

interface ExpectedArtifact {
  name: string;
  step: number;
  index: number;
  role: string;
}

/** What the scripted model's two cycles produce: research + code, then a critique. */
export function expectedArtifacts(): ExpectedArtifact[] {
  return [
    { name: 'research.md', step: 1, index: 0, role: 'research-specialist' },
    { name: 'solution.py', step: 1, index: 1, role: 'code-writer' },
    { name: 'critique.json', step: 2, index: 0, role: 'critic' },
  ];
}

export interface VerifyResult {
  done: number;
  lost: number;
  duplicates: number;
  /** Goals that needed more cycles than the script's two: a subtask failed for good and was planned again. */
  replanned: number;
  problems: string[];
  /** Jobs that failed for good, with their reasons (e.g. stalled more than the allowed count). */
  failures: string[];
  reExecutions: ChaosReport['reExecutions'];
}

/** Each cycle's subtasks, from its first `dispatched` event (a re-dispatch repeats the same ones). */
export function dispatchedCycles(events: TimelineEvent[]): Map<number, SubtaskRef[]> {
  const cycles = new Map<number, SubtaskRef[]>();
  for (const e of events) if (e.type === 'dispatched' && !cycles.has(e.step)) cycles.set(e.step, e.subtasks);
  return cycles;
}

export interface TimelineCheck {
  problems: string[];
  duplicates: number;
  /** Subtask runs beyond the first per (step, index). */
  subtaskReruns: number;
  /** Cycles dispatched again by a re-delivered plan job. */
  redispatches: number;
}

type EventOf<T extends TimelineEvent['type']> = Extract<TimelineEvent, { type: T }>;

/**
 * What a goal's timeline must show: one `finished`; each dispatched cycle planned once and
 * reflected exactly once (all of a done goal's cycles, and every cycle before a failed goal's
 * last); each subtask of a reflected cycle ended (`subtask_finished` or `subtask_failed`), and
 * no run of it started or ended twice. A subtask may end more than once, from different runs:
 * a run that recorded its end and died before its job was acked runs again (at-least-once),
 * and a job that then failed for good adds a `subtask_failed` without a thread. One may not
 * end at all only when the reflection saw it failed: a job that failed for good whose process
 * died before recording it, or a run skipped (the budget ran out, the goal ended).
 */
export function checkTimeline(goalId: string, status: string, events: TimelineEvent[]): TimelineCheck {
  const out: TimelineCheck = { problems: [], duplicates: 0, subtaskReruns: 0, redispatches: 0 };
  const problem = (what: string, duplicate = false) => {
    out.problems.push(`goal ${goalId}: ${what}`);
    if (duplicate) out.duplicates++;
  };
  const finished = events.filter((e) => e.type === 'finished').length;
  if (finished !== 1) problem(`${finished} finished events`, finished > 1);
  const cycles = dispatchedCycles(events);
  const last = Math.max(0, ...cycles.keys());
  for (const [step, subtasks] of cycles) {
    const ofStep = events.filter((e) => 'step' in e && e.step === step);
    const reflected = ofStep.filter((e): e is EventOf<'reflected'> => e.type === 'reflected');
    if (reflected.length > 1) problem(`cycle ${step} reflected ${reflected.length} times`, true);
    // A cycle is reflected on before the next is planned, and before its goal is done.
    if (reflected.length === 0 && (status === 'done' || step < last))
      problem(`cycle ${step} was dispatched but never reflected on`);
    const planned = ofStep.filter((e) => e.type === 'planned').length;
    if (planned > 1) problem(`cycle ${step} planned ${planned} times (a concurrent duplicate delivery)`);
    out.redispatches += ofStep.filter((e) => e.type === 'dispatched' && e.redelivered).length;
    for (const t of subtasks) checkSubtask(step, t, ofStep, reflected[0]?.outcomes, problem, out);
  }
  return out;
}

/** One dispatched subtask's runs: each started and ended at most once; ended, if its cycle was reflected. */
function checkSubtask(
  step: number,
  t: SubtaskRef,
  ofStep: TimelineEvent[],
  outcomes: SubtaskOutcomeRef[] | undefined,
  problem: (what: string, duplicate?: boolean) => void,
  out: TimelineCheck,
): void {
  const k = `${step}:${t.index}`;
  const mine = ofStep.filter((e) => 'index' in e && e.index === t.index);
  const runs = new Set<string>();
  let goneOn = 0;
  for (const e of mine) {
    if (e.type !== 'subtask_started') continue;
    // A run (its thread) starts once: a second event of it is a re-sent write applied twice,
    // unless it says the run went on after its process died (from its last tool call).
    if (runs.has(e.threadId) && e.restarted) goneOn++;
    else if (runs.has(e.threadId)) problem(`subtask ${k} run ${e.threadId} started twice`, true);
    runs.add(e.threadId);
  }
  out.subtaskReruns += Math.max(0, runs.size - 1) + goneOn;
  const ends = new Map<string, number>();
  for (const e of mine) {
    if (e.type !== 'subtask_finished' && e.type !== 'subtask_failed') continue;
    // Without a thread: the failure recorded after the job failed for good (once per job).
    const run = e.threadId ?? '';
    ends.set(run, (ends.get(run) ?? 0) + 1);
    if (e.threadId && !runs.has(e.threadId)) problem(`subtask ${k} run ${e.threadId} ended but never started`);
  }
  for (const [run, n] of ends) {
    if (n > 1) problem(`subtask ${k} ${run ? `run ${run} ended` : 'was recorded failed for good'} ${n} times`, true);
  }
  const outcome = outcomes?.find((o) => o.index === t.index)?.status;
  if (outcomes && ends.size === 0 && outcome !== 'failed')
    problem(
      `subtask ${k} (${t.artifact}) never ended (no subtask_finished or subtask_failed; outcome ${outcome ?? 'none'})`,
    );
}

/** How one goal's checks report: a problem, one that costs the goal (lost), or one that is an effect twice. */
interface Findings {
  problem(what: string): void;
  lose(what: string): void;
  duplicate(what: string): void;
}

/** What verifyGoals adds up over the goals. */
interface Tally {
  problems: string[];
  lostGoals: Set<string>;
  duplicates: number;
  done: number;
  replanned: number;
  subtaskReruns: number;
  redispatches: number;
}

function findingsFor(goalId: string, tally: Tally): Findings {
  const problem = (what: string) => {
    tally.problems.push(`goal ${goalId}: ${what}`);
  };
  return {
    problem,
    lose: (what) => {
      problem(what);
      tally.lostGoals.add(goalId);
    },
    duplicate: (what) => {
      problem(what);
      tally.duplicates++;
    },
  };
}

/** A subtask an artifact name was dispatched to. */
interface DispatchTarget {
  step: number;
  index: number;
  role: string;
}

/** An entry of a goal's files hash, as the verifier reads it. */
interface ArtifactEntry {
  status: string;
  version: number;
  bytes: number;
  writer?: string;
  step: number;
  role?: string;
}

/**
 * Which subtasks (job ids) each artifact name was dispatched to, over all cycles. Normally
 * one; more when a subtask failed for good and the planner asked for the file again.
 */
function artifactTargets(events: TimelineEvent[]): Map<string, DispatchTarget[]> {
  const targets = new Map<string, DispatchTarget[]>();
  for (const [step, subtasks] of dispatchedCycles(events)) {
    for (const t of subtasks) {
      targets.set(t.artifact, [...(targets.get(t.artifact) ?? []), { step, index: t.index, role: t.role }]);
    }
  }
  return targets;
}

/** The scripted model's answer for artifact `a`'s subtask, stored as the worker stores it; null: its job is gone. */
async function scriptedArtifact(
  fleet: Pick<Fleet, 'client' | 'cfg'>,
  scripted: ScriptedProvider,
  goal: string,
  goalId: string,
  a: ExpectedArtifact,
): Promise<string | null> {
  const { client, cfg } = fleet;
  const job = await client.queues.get(subagentQueueName(a.role)).getJob(subtaskJobId(goalId, a.step, a.index));
  if (!job) return null;
  const data = job.data as SubagentJob;
  // The critic's task embeds solution.py, as the worker built it.
  const task = await buildSubagentTask({ vfs: client.vfs, cfg }, data);
  const spec = cfg.roles.find((r) => r.name === a.role)!;
  // Ask for the final answer (the tool turn is not the artifact).
  const res = await scripted.createMessage(
    {
      model: 'scripted',
      system: spec.systemPrompt,
      messages: [
        { role: 'user', content: task },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'go on' },
      ],
      max_tokens: 1000,
    },
    {
      role: a.role,
      kind: 'subagent',
      contract: spec.contract,
      tier: spec.tier,
      subject: { goal, instruction: data.instruction },
    },
  );
  // Stored as the worker stores an accepted answer: a code block as the code it holds.
  return artifactOfAnswer(contractFor(spec.contract), responseText(res));
}

/** The files hash holds no name the script does not produce, and no content lacks its index entry. */
function checkArtifactNames(
  files: Record<string, string>,
  contents: Record<string, string>,
  expected: ExpectedArtifact[],
  f: Findings,
): void {
  for (const name of Object.keys(files)) {
    if (!expected.some((a) => a.name === name)) f.duplicate(`unexpected artifact ${JSON.stringify(name)}`);
  }
  for (const name of Object.keys(contents)) {
    if (!files[name]) f.problem(`content without an index entry: ${JSON.stringify(name)}`);
  }
}

/** An artifact's index entry: written once per subtask that targeted it, done, by one of those subtasks. */
function checkEntry(
  goalId: string,
  a: ExpectedArtifact,
  e: ArtifactEntry,
  dispatched: DispatchTarget[],
  f: Findings,
): DispatchTarget | undefined {
  const writer = dispatched.find((t) => subtaskJobId(goalId, t.step, t.index) === e.writer);
  // Each dispatched subtask writes its file once, whatever its re-executions: a version
  // beyond the number of subtasks that targeted the name is a duplicate write.
  if (e.version > Math.max(1, dispatched.length)) {
    f.duplicate(
      `${a.name} is at version ${e.version} ` +
        `after ${dispatched.length} subtask(s) targeted it (written more than once)`,
    );
  }
  if (e.status !== 'done') f.lose(`${a.name} has status ${e.status}`);
  if (!writer) {
    const dispatchedIds = dispatched.map((t) => subtaskJobId(goalId, t.step, t.index)).join(', ');
    f.lose(`${a.name} was written by ${e.writer}, not by a subtask dispatched for it (${dispatchedIds || 'none'})`);
    return undefined;
  }
  if (e.step !== writer.step || e.role !== a.role || writer.role !== a.role)
    f.lose(`${a.name}: step ${e.step} role ${e.role}, its job is step ${writer.step} role ${writer.role}`);
  return writer;
}

/** An artifact's content (`a` at its writer's step and index): its bytes, its contract, the scripted answer. */
async function checkContent(
  fleet: Pick<Fleet, 'client' | 'cfg'>,
  scripted: ScriptedProvider,
  goal: string,
  goalId: string,
  a: ExpectedArtifact,
  e: ArtifactEntry,
  f: Findings,
): Promise<void> {
  const content = await fleet.client.vfs.read(goalId, a.name);
  if (content === null) {
    f.lose(`${a.name} has no content`);
    return;
  }
  if (Buffer.byteLength(content, 'utf8') !== e.bytes)
    f.lose(`${a.name}: ${Buffer.byteLength(content, 'utf8')} bytes stored, entry says ${e.bytes}`);
  // An artifact stored as the answer itself must keep its contract (code is checked against
  // the scripted answer's code below).
  const spec = fleet.cfg.roles.find((r) => r.name === a.role)!;
  const contract = contractFor(spec.contract);
  const verdict = contract.artifact ? { ok: true as const } : contract.check(content);
  if (!verdict.ok) f.lose(`${a.name} breaks the ${spec.contract} contract: ${verdict.problem}`);
  const want = await scriptedArtifact(fleet, scripted, goal, goalId, a);
  if (want === null) f.lose(`${a.name}: the job ${e.writer} is gone, cannot check its content`);
  else if (content !== want)
    f.lose(
      `${a.name}: content differs from the scripted answer for ${e.writer} ` +
        `(${content.length} vs ${want.length} chars)`,
    );
}

/** One goal: its status, its artifacts (names, entries, contents) and its timeline, added to `tally`. */
async function verifyGoal(
  fleet: Pick<Fleet, 'client' | 'cfg'>,
  scripted: ScriptedProvider,
  goalId: string,
  tally: Tally,
): Promise<void> {
  const { client } = fleet;
  const f = findingsFor(goalId, tally);
  const g = await client.goals.get(goalId);
  if (!g) {
    f.lose('missing');
    return;
  }
  if (g.status !== 'done') f.lose(`status ${g.status}${g.reason ? ` (${g.reason})` : ''}`);
  else tally.done++;
  if (g.step > 2) tally.replanned++;

  const events = (await client.goals.events(goalId, '-', 10_000)).map((x) => x.event);
  const targets = artifactTargets(events);
  const files = await client.redis.hgetall(client.goals.keys.files(goalId));
  const contents = await client.redis.hgetall(client.goals.keys.content(goalId));
  const expected = expectedArtifacts();
  checkArtifactNames(files, contents, expected, f);
  for (const a of expected) {
    const raw = files[a.name];
    if (!raw) {
      f.lose(`artifact ${a.name} is missing`);
      continue;
    }
    const e = JSON.parse(raw) as ArtifactEntry;
    const writer = checkEntry(goalId, a, e, targets.get(a.name) ?? [], f);
    if (writer)
      await checkContent(fleet, scripted, g.goal, goalId, { ...a, step: writer.step, index: writer.index }, e, f);
  }

  const timeline = checkTimeline(goalId, g.status, events);
  tally.problems.push(...timeline.problems);
  tally.duplicates += timeline.duplicates;
  tally.subtaskReruns += timeline.subtaskReruns;
  tally.redispatches += timeline.redispatches;
}

/** Job-level re-executions of these goals' jobs, straight from BullMQ's records, and the jobs that failed for good. */
async function jobReExecutions(fleet: Pick<Fleet, 'client' | 'cfg'>, goalIds: string[]) {
  const { client, cfg } = fleet;
  const ours = new Set(goalIds);
  const jobs = { plan: 0, reflect: 0, subagent: 0 };
  let stalled = 0;
  let failedJobs = 0;
  const failures: string[] = [];
  const queueKinds: [string, keyof typeof jobs][] = [
    [PLAN_QUEUE, 'plan'],
    [REFLECT_QUEUE, 'reflect'],
    ...cfg.roles.map((r) => [subagentQueueName(r.name), 'subagent'] as [string, keyof typeof jobs]),
  ];
  for (const [queue, kind] of queueKinds) {
    const list = await client.queues
      .get(queue)
      .getJobs(['completed', 'failed', 'active', 'waiting', 'delayed', 'waiting-children'], 0, -1);
    for (const job of list) {
      if (!job || !ours.has(job.data?.goalId)) continue;
      jobs[kind] += Math.max(0, (job.attemptsStarted ?? 1) - 1);
      stalled += job.stalledCounter ?? 0;
      if (job.failedReason && (await job.getState()) === 'failed') {
        failedJobs++;
        failures.push(`${queue}/${job.id}: ${job.failedReason}`);
      }
    }
  }
  return { jobs, stalled, failedJobs, failures };
}

/** Every goal's deterministic job ids exist (nothing was dispatched under another id), for the first five goals. */
async function missingJobIds(fleet: Pick<Fleet, 'client'>, goalIds: string[]): Promise<string[]> {
  const problems: string[] = [];
  for (const goalId of goalIds.slice(0, 5)) {
    for (const [queue, id] of [
      [PLAN_QUEUE, planJobId(goalId, 1)],
      [REFLECT_QUEUE, reflectJobId(goalId, 1)],
    ] as const) {
      if (!(await fleet.client.queues.get(queue).getJob(id)))
        problems.push(`goal ${goalId}: job ${queue}/${id} not found`);
    }
  }
  return problems;
}

/**
 * Checks every goal: status done; its files hash holds exactly the expected names, each at
 * version 1, written by its subtask's job, status done, with bytes matching the content and
 * the content exactly what the scripted model answers for that subtask (so complete, and
 * passing the role's output contract); the timeline shows one finish, one reflection per
 * cycle and an end of each subtask (checkTimeline). Counts re-executions from the timeline and
 * from BullMQ's job records.
 */
export async function verifyGoals(fleet: Pick<Fleet, 'client' | 'cfg'>, goalIds: string[]): Promise<VerifyResult> {
  const scripted = new ScriptedProvider({ latencyMs: 0, roles: fleet.cfg.roles });
  const tally: Tally = {
    problems: [],
    lostGoals: new Set(),
    duplicates: 0,
    done: 0,
    replanned: 0,
    subtaskReruns: 0,
    redispatches: 0,
  };
  for (const goalId of goalIds) await verifyGoal(fleet, scripted, goalId, tally);
  const { jobs, stalled, failedJobs, failures } = await jobReExecutions(fleet, goalIds);
  tally.problems.push(...(await missingJobIds(fleet, goalIds)));
  return {
    done: tally.done,
    lost: tally.lostGoals.size,
    duplicates: tally.duplicates,
    replanned: tally.replanned,
    problems: tally.problems,
    failures,
    reExecutions: {
      subtasks: tally.subtaskReruns,
      jobs,
      stalled,
      failedJobs,
      redispatches: tally.redispatches,
    },
  };
}

/** Enqueues the goals evenly over `enqueueSpreadMs`, so that kills land throughout the run. */
async function enqueueSpread(
  fleet: Fleet,
  opts: Pick<ChaosOptions, 'goals' | 'enqueueSpreadMs'>,
  seed: number,
): Promise<string[]> {
  const goalIds: string[] = [];
  const gap = opts.goals > 1 ? opts.enqueueSpreadMs / (opts.goals - 1) : 0;
  for (let i = 0; i < opts.goals; i++) {
    goalIds.push(await fleet.client.enqueue({ goal: `Chaos goal ${i} (seed ${seed}): sort numbers #${i}` }));
    if (gap) await sleep(gap);
  }
  return goalIds;
}

/**
 * Once the goals' statuses are final: waits for the ended goals' jobs to settle, then verifies
 * every goal. A job still live at the bound is a problem, listed before the verifier's.
 */
async function verifySettled(
  fleet: Fleet,
  goalIds: string[],
  status: Map<string, string>,
  opts: ChaosOptions,
  log: (line: string) => void,
): Promise<VerifyResult> {
  // Only goals that ended: a goal still open is lost already, its jobs need not settle.
  const ended = goalIds.filter((id) => isTerminal(status.get(id) ?? ''));
  const bound = settleBoundMs(opts);
  const stillLive = await waitForJobsToSettle(fleet, ended, bound);
  if (stillLive.length) log(`chaos: ${stillLive.length} job(s) still live ${bound} ms after the goals settled`);
  const v = await verifyGoals(fleet, goalIds);
  const late = stillLive.map((j) => `job ${j} is still live ${bound} ms after its goal ended`);
  return { ...v, problems: [...late, ...v.problems] };
}

/** The whole run: fleet, chaos, goals, verification. The caller owns the Redis. */
export async function runChaos(redisUrl: string, opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => {});
  const seed = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
  const { log: _log, restartRedis: _restart, ...settings } = opts;
  void _log;
  void _restart;
  // Fail fast on a bad setting rather than inside ten child processes.
  loadConfig({
    REDIS_URL: redisUrl,
    DEEPQ_LOCK_DURATION_MS: String(opts.lockDurationMs),
    DEEPQ_STALLED_INTERVAL_MS: String(opts.stalledIntervalMs),
  });
  log(`chaos: starting ${opts.replicas} process(es) per service (seed ${seed})`);
  const faults = opts.faults
    ? await startFaults(redisUrl, { ...opts.faults, seed, restart: opts.restartRedis, log })
    : undefined;
  const fleet = await startChaosFleet(faults?.proxy.url ?? redisUrl, opts);
  log(`chaos: ${fleet.procs.length} processes up; ${opts.goals} goals, a SIGKILL every ${opts.killEveryMs} ms`);
  const t0 = performance.now();
  const chaos = startChaos(fleet, { killEveryMs: opts.killEveryMs, seed, log });
  faults?.begin();
  let goalIds: string[] = [];
  let status = new Map<string, string>();
  try {
    goalIds = await enqueueSpread(fleet, opts, seed);
    const enqueueSeconds = ((performance.now() - t0) / 1000).toFixed(1);
    log(`chaos: ${goalIds.length} goals enqueued after ${enqueueSeconds} s; ${chaos.kills} kills so far`);
    status = await waitForGoals(fleet, goalIds, opts.timeoutMs);
  } finally {
    await chaos.stop();
    await faults?.stop();
  }
  const wallSeconds = (performance.now() - t0) / 1000;
  const open = [...status.values()].filter((s) => !isTerminal(s)).length;
  log(
    `chaos: goals settled after ${wallSeconds.toFixed(1)} s (${open} still open); ` +
      `${chaos.kills} kills, ${chaos.restarts} restarts; waiting for their jobs to settle, then verifying`,
  );
  try {
    const v = await verifySettled(fleet, goalIds, status, opts, log);
    return {
      goals: goalIds.length,
      done: v.done,
      lost: v.lost,
      duplicates: v.duplicates,
      replanned: v.replanned,
      kills: chaos.kills,
      restarts: chaos.restarts,
      unexpectedExits: chaos.unexpectedExits,
      reExecutions: v.reExecutions,
      problems: v.problems,
      failures: v.failures,
      ...(faults ? { faults: faults.counts } : {}),
      wallSeconds: Math.round(wallSeconds * 10) / 10,
      settings: { ...settings, seed },
    };
  } finally {
    await fleet.stop();
    await faults?.close();
  }
}

export function formatReport(r: ChaosReport): string {
  const x = r.reExecutions;
  const { settings } = r;
  return [
    `goals ${r.goals}, done ${r.done}, lost ${r.lost}, duplicates ${r.duplicates}, ` +
      `re-planned after a failed subtask ${r.replanned}`,
    `kills ${r.kills}, restarts ${r.restarts}, unexpected exits ${r.unexpectedExits.length}`,
    `re-executions: subtasks ${x.subtasks}; ` +
      `job starts beyond the first: plan ${x.jobs.plan}, reflect ${x.jobs.reflect}, subagent ${x.jobs.subagent}; ` +
      `stalled ${x.stalled}; re-dispatches ${x.redispatches}; failed jobs ${x.failedJobs}`,
    ...(r.faults
      ? [
          `faults: ${r.faults.drops} lost replies, ${r.faults.cuts} connection cuts, ` +
            `${r.faults.redisRestarts} Redis restarts`,
        ]
      : []),
    `wall time ${r.wallSeconds} s (lock ${settings.lockDurationMs} ms, ` +
      `stalled interval ${settings.stalledIntervalMs} ms, latency ${settings.latencyMs} ms, seed ${settings.seed})`,
  ].join('\n');
}

/**
 * Why a chaos run failed, one reason a line; none when it passed. Any problem the verifier
 * lists fails it (a cycle planned twice, a done goal without its `finished` event, content
 * without an index entry, a missing job, a job still live after its goal ended...), not only
 * lost and duplicated work. Jobs that failed for good do not by themselves: the stall guard
 * (`DEEPQ_MAX_STALLED_COUNT`) is expected to fire under this much killing, and a goal it cost
 * is counted lost.
 */
export function chaosFailures(r: ChaosReport): string[] {
  const reasons: string[] = [];
  if (r.unexpectedExits.length) reasons.push(`${r.unexpectedExits.length} process(es) exited without being killed`);
  if (r.done !== r.goals) reasons.push(`${r.goals - r.done} of ${r.goals} goals did not end done`);
  if (r.lost) reasons.push(`${r.lost} goal(s) lost`);
  if (r.duplicates) reasons.push(`${r.duplicates} effect(s) happened twice`);
  if (r.problems.length) reasons.push(`the verifier found ${r.problems.length} problem(s)`);
  return reasons;
}

/** What every chaos run must show: no process died by itself, every goal done, nothing lost or twice. */
export function assertNothingLost(report: ChaosReport): void {
  assert.deepEqual(
    report.unexpectedExits.map((e) => `${e.name} ${e.code ?? e.signal}: ${e.tail}`),
    [],
    'a process died without being killed',
  );
  assert.deepEqual(report.problems, []);
  assert.equal(report.done, report.goals);
  assert.equal(report.lost, 0);
  assert.equal(report.duplicates, 0);
}
