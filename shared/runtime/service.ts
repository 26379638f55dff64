// Runs one queue consumer as a service: the BullMQ worker, its ops endpoints, queue-depth
// gauges, cross-process cancellation, and a graceful drain on SIGTERM.

import type { Server } from 'node:http';
import {
  DelayedError,
  type Job,
  type Processor,
  RateLimitError,
  UnrecoverableError,
  WaitingError,
  Worker,
} from 'bullmq';
import type { Redis } from 'ioredis';
import { ModelCallError } from '../agent/providers/types.ts';
import { ErrorCode, hasCode } from '../errors.ts';
import { isTerminal } from '../goal/status.ts';
import { type ActiveRun, ActiveRuns } from './active-runs.ts';
import { delayForFullRedis } from './full-redis.ts';
import { scrubSecrets } from './logger.ts';
import { startOpsServer } from './ops-server.ts';
import { WaitsAloneForRateLimit } from './queue-rate-limit.ts';
import { createRedis, evictionPolicy, pingRedis } from './redis.ts';
import type { Runtime } from './runtime.ts';
import { takeStartSignal, workersStarting } from './start-signals.ts';
import { annotateActiveSpan, bullTelemetry, inJobGoalTrace, stopTracing } from './tracing.ts';
import { watchWorkerErrors } from './worker-errors.ts';

/** `token` is the job's lock token: a handler that moves its job (job.moveToDelayed) needs it. */
export type JobHandler = (job: Job, signal: AbortSignal, token?: string) => Promise<unknown>;

export interface ServiceOptions {
  rt: Runtime;
  name: string;
  queueName: string;
  role: string;
  concurrency: number;
  handler: JobHandler;
  /** Queues whose depth this process reports (default: its own). */
  reportQueues?: string[];
  /** Other queues this process also consumes (the reflector hosts the sweep). */
  sideQueues?: { queueName: string; role: string; concurrency: number; handler: JobHandler }[];
  /** Setup that waits on Redis before the workers take jobs (the ops server already answers). */
  beforeRun?: () => Promise<void>;
  /** Extra work after the worker starts (e.g. the sweep schedule). */
  onStart?: () => Promise<void>;
  /** Called when a job failed for good (attempts exhausted or unrecoverable). */
  onFinalFailure?: (job: Job, err: Error) => Promise<void>;
  /** Called with each goal id the cancel channel carries, after this process aborted its jobs of it. */
  onCancel?: (goalId: string) => void;
  /** More /readyz checks (e.g. `mcp:<server>` of a worker's MCP servers); each must be true. */
  readyChecks?: () => Record<string, boolean> | Promise<Record<string, boolean>>;
}

export interface RunningService {
  worker: Worker;
  port: number;
  drainTimeoutMs: number;
  stop(): Promise<void>;
}

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'prioritized', 'waiting-children'] as const;

export async function startService(opts: ServiceOptions): Promise<RunningService> {
  const { rt } = opts;
  exitIfOrphanedWhileStarting(rt.logger);
  if (rt.cfg.envNotice) rt.logger.warn(rt.cfg.envNotice);
  const active = new ActiveRuns();
  const workers = createWorkers(opts, active);
  const [worker] = workers;
  let stopping = false;
  // Ready only once the start is complete: a probe answered earlier let a rollout move on
  // (or a test go ahead) before the maintenance schedules were written.
  let startDone = false;
  const ops = await startOpsServer({
    port: rt.cfg.metricsPort,
    host: rt.cfg.metricsHost,
    registry: rt.metrics.registry,
    async ready() {
      const redisOk = await pingRedis(rt.redis);
      const workerOk = startDone && worker!.isRunning() && !stopping;
      const checks = { redis: redisOk, worker: workerOk, ...(await opts.readyChecks?.()) };
      return { ok: Object.values(checks).every(Boolean), checks };
    },
    // One getJobCounts round per queue, shared by concurrent scrapes and reused for 1 s.
    beforeScrape: () => refreshScrapedGauges(rt, opts.reportQueues ?? [opts.queueName]),
    refreshTtlMs: 1000,
  });
  // The ops server is up before anything waits on Redis: /healthz answers while Redis is
  // away, and /readyz says so. Its port is logged now (METRICS_PORT=0 picks one): the
  // `started` line waits for Redis.
  rt.logger.info({ metricsHost: ops.host, metricsPort: ops.port }, `${opts.name} ops server listening`);
  const sub = await listenForCancels(rt, opts, active);
  await warnIfEvicting(rt);
  await opts.beforeRun?.();
  workersStarting();
  for (const w of workers) {
    void w.run().catch((err) => rt.logger.error({ err }, 'worker stopped'));
    await w.waitUntilReady();
  }
  await opts.onStart?.();
  startDone = true;
  const started = {
    queue: opts.queueName,
    concurrency: opts.concurrency,
    metricsHost: ops.host,
    metricsPort: ops.port,
    provider: rt.provider.name,
  };
  rt.logger.info(started, `${opts.name} started`);

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopping = true;
    stopped ??= drainAndClose(rt, { workers, active, sub, server: ops.server });
    return stopped;
  };
  return { worker: worker!, port: ops.port, drainTimeoutMs: rt.cfg.drainTimeoutMs, stop };
}

/** Said at every start, in the structured log an operator reads (BullMQ's own line is plain text). */
async function warnIfEvicting(rt: Runtime): Promise<void> {
  const policy = await evictionPolicy(rt.redis).catch(() => undefined);
  if (policy === undefined || policy === 'noeviction') return;
  rt.logger.error(
    { maxmemoryPolicy: policy },
    `Redis maxmemory-policy is ${policy}: deepq needs noeviction, or Redis may drop goals, queued jobs and ` +
      'schedules when memory runs short (set maxmemory-policy noeviction)',
  );
}

/**
 * The series the alerts read exist from the start: rate() and increase() miss a series' first
 * increment (a short first episode of a full Redis would not alert at all).
 */
function zeroJobSeries(opts: ServiceOptions): void {
  for (const q of [{ queueName: opts.queueName, role: opts.role }, ...(opts.sideQueues ?? [])])
    for (const status of ['completed', 'failed'])
      opts.rt.metrics.jobs.inc({ queue: q.queueName, role: q.role, status }, 0);
  for (const where of ['job', 'fetch']) opts.rt.metrics.redisFull.inc({ where }, 0);
}

function createWorkers(opts: ServiceOptions, active: ActiveRuns): Worker[] {
  const { rt } = opts;
  const base = {
    connection: rt.bull,
    prefix: rt.cfg.prefix,
    lockDuration: rt.cfg.lockDurationMs,
    stalledInterval: rt.cfg.stalledIntervalMs,
    maxStalledCount: rt.cfg.maxStalledCount,
    autorun: false,
    telemetry: bullTelemetry(),
  };
  const marks: JobMarks = { hooked: new WeakSet(), ran: new WeakSet() };
  zeroJobSeries(opts);
  const own = { queue: opts.queueName, role: opts.role, handler: opts.handler, onFinalFailure: opts.onFinalFailure };
  const main = new Worker(opts.queueName, instrumented(rt, own, active, marks), {
    ...base,
    concurrency: opts.concurrency,
  });
  main.on('failed', (job, err) => onJobFailed(opts, job, err, marks));
  const side = (opts.sideQueues ?? []).map(
    (q) =>
      new Worker(q.queueName, instrumented(rt, { ...q, queue: q.queueName }, active, marks), {
        ...base,
        concurrency: q.concurrency,
      }),
  );
  for (const w of [main, ...side]) {
    watchWorkerErrors(rt, w);
    // A job whose lock could not be renewed is the stalled check's to hand out again: its run
    // here stops, rather than going on beside the next one (twice the calls and tokens).
    w.on('lockRenewalFailed', (ids) => {
      for (const id of ids) w.cancelJob(id, LOCK_LOST);
      rt.logger.warn({ jobIds: ids }, 'lock lost (Redis too slow to renew it): stopping these runs');
    });
  }
  return [main, ...side];
}

/** Jobs this process's processor ran (`ran`), and those whose final failure it recorded (`hooked`). */
interface JobMarks {
  hooked: WeakSet<Job>;
  ran: WeakSet<Job>;
}

/** A queue's processor as instrumented() wraps it. */
interface Processing {
  queue: string;
  role: string;
  handler: JobHandler;
  onFinalFailure?: ServiceOptions['onFinalFailure'];
}

/** Wraps a handler with job metrics, the active-runs bookkeeping and the final-failure hook. */
function instrumented(rt: Runtime, p: Processing, active: ActiveRuns, marks: JobMarks): Processor {
  const { queue, role, handler } = p;
  return async (job, token, bullSignal) => {
    const started = performance.now();
    marks.ran.add(job);
    annotateActiveSpan({ 'deepq.goal.id': job.data?.goalId, 'deepq.step': job.data?.step, 'deepq.role': role });
    const { run, end } = active.start(job, token, bullSignal);
    const signal = run.controller.signal;
    try {
      const earlier = active.othersOf(run);
      if (earlier.length) await deliveredAgain(rt, run, earlier);
      const res = await inJobGoalTrace(job, () => handler(job, signal, token));
      // A run its goal's end (a cancel, a budget) stopped returns as skipped: not work completed.
      const stopped = signal.reason === LOCK_LOST ? 'lock_lost' : 'aborted';
      const ended = signal.aborted && signal.reason !== SHUTDOWN;
      rt.metrics.jobs.inc({ queue, role, status: ended ? stopped : 'completed' });
      return res;
    } catch (err) {
      scrubError(err, rt.secrets);
      // A job that moved itself (delayed, parked, rate limited) is no one's to hand back.
      const moved = notFailed(err) !== undefined;
      const back = moved
        ? null
        : ((await handedBack(rt, job, token, signal)) ?? (await delayForFullRedis(rt, job, token, err)));
      // Its lock lost: here by the renewal's failure, or a write refused after another worker took it.
      const lost = signal.reason === LOCK_LOST || hasCode(err, ErrorCode.LockLost);
      const failure = back ?? unrecoverableIfRefused(err);
      const failed = failsForGood(job, failure) ? 'failed' : 'retried';
      rt.metrics.jobs.inc({
        queue,
        role,
        status: back ? 'handed_back' : lost ? 'lock_lost' : (notFailed(err) ?? failed),
      });
      if (!back && !lost && !notFailed(err)) await finalFailureFirst(rt, p, job, failure, marks.hooked);
      throw failure;
    } finally {
      end();
      rt.metrics.jobDuration.observe({ queue, role }, (performance.now() - started) / 1000);
    }
  };
}

/** How long a job delivered again beside its earlier run waits: BullMQ finishes with that run first. */
const REDELIVERY_WAIT_MS = 1000;

/**
 * A delivery of a job whose earlier run still goes on in this process (its lock was lost and
 * the stalled check handed it back here): BullMQ now renews the earlier run's lock with this
 * delivery's token and, once either ends, stops renewing the other's, so both would run (twice
 * the calls, and a late write over newer work). The earlier run stops; this delivery waits a
 * moment in the delayed set (no attempt used), and the next one runs alone.
 */
async function deliveredAgain(rt: Runtime, run: ActiveRun, earlier: ActiveRun[]): Promise<never> {
  const { job, token } = run;
  const fields = { jobId: job.id, queue: job.queueName, goalId: run.goalId };
  rt.logger.warn(fields, 'delivered again while its earlier run still ran here (lock lost): stopping that run');
  for (const e of earlier) e.controller.abort(LOCK_LOST);
  await Promise.all(earlier.map((e) => e.settled));
  try {
    await job.moveToDelayed(Date.now() + REDELIVERY_WAIT_MS, token);
  } catch (err) {
    // Not moved: its lock runs out, and the stalled check hands it out again.
    rt.logger.warn({ ...fields, err: { message: (err as Error).message } }, 'could not delay the delivery');
  }
  throw new DelayedError();
}

/**
 * A job failing for good is recorded (its subtask_failed, a failed goal) before BullMQ moves it:
 * the move releases its parent, whose reflection would otherwise run before the record lands.
 * The 'failed' event skips a job recorded here; a job failed outside its processor (stalled too
 * often) is recorded there.
 */
async function finalFailureFirst(rt: Runtime, p: Processing, job: Job, err: unknown, hooked: WeakSet<Job>) {
  if (!p.onFinalFailure || !(err instanceof Error) || !failsForGood(job, err)) return;
  hooked.add(job);
  await p.onFinalFailure(job, err).catch((e) => rt.logger.error({ err: e }, 'final-failure hook failed'));
}

/** A failure of the job's last attempt, or one that no attempt may retry: the job fails for good. */
function failsForGood(job: Job, err: unknown): boolean {
  return err instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
}

/**
 * A model call the provider refused as bad (400, 401, 404: a prompt too long, a wrong key or
 * model) would be refused again: the job fails now, not after every attempt replays its turns.
 */
function unrecoverableIfRefused(err: unknown): unknown {
  if (!(err instanceof ModelCallError) || err.kind !== 'client') return err;
  // The cause keeps what was noted on the error (a failed run's tokens) for the final-failure hook.
  return Object.assign(new UnrecoverableError(err.message), { cause: err });
}

/**
 * BullMQ stores a failed job's message and stack (failedReason, stacktrace), which the reflector
 * hands on (a cycle's outcomes, the next planner's prompt): a provider's error body that echoes
 * the key must not take it there. Scrubbed in place, so the error keeps its class.
 */
function scrubError(err: unknown, secrets: string[]): void {
  if (!(err instanceof Error)) return;
  err.message = scrubSecrets(err.message, secrets);
  if (err.stack) err.stack = scrubSecrets(err.stack, secrets);
}

/** A job handed back to the queue on purpose is no failure: a 429 pause, or a wait for a human. */
function notFailed(err: unknown): string | undefined {
  if (err instanceof RateLimitError || err instanceof WaitsAloneForRateLimit) return 'rate_limited';
  if (err instanceof DelayedError) return 'delayed';
  return undefined;
}

function onJobFailed(opts: ServiceOptions, job: Job | undefined, err: Error, marks: JobMarks): void {
  if (!job) return;
  const log = opts.rt.logger;
  const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
  const fields = {
    goalId: job.data?.goalId,
    step: job.data?.step,
    role: opts.role,
    jobId: job.id,
    attempt: job.attemptsMade,
    final,
  };
  log.warn(
    { ...fields, reason: scrubSecrets(err.message, opts.rt.secrets) },
    final ? 'job failed for good' : 'job failed, will retry',
  );
  // Failed by BullMQ before any processor ran (stalled, or started, too often): counted here.
  if (!marks.ran.has(job)) opts.rt.metrics.jobs.inc({ queue: opts.queueName, role: opts.role, status: 'failed' });
  if (final && !marks.hooked.has(job))
    opts.onFinalFailure?.(job, err).catch((e) => log.error({ err: e }, 'final-failure hook failed'));
}

/**
 * Redis reachable or not, then (if it is) the queue depths and pending approvals: while Redis is
 * away a scrape says so at once, where it used to wait 5 s and serve the old depths as current.
 */
async function refreshScrapedGauges(rt: Runtime, queueNames: string[]): Promise<void> {
  const up = await pingRedis(rt.redis);
  rt.metrics.redisUp.set(up ? 1 : 0);
  if (up) await reportDepths(rt, queueNames);
}

async function reportDepths(rt: Runtime, queueNames: string[]): Promise<void> {
  await Promise.all([
    ...queueNames.map(async (q) => {
      const counts = await rt.queues.get(q).getJobCounts(...QUEUE_STATES);
      for (const s of QUEUE_STATES) rt.metrics.queueJobs.set({ queue: q, state: s }, counts[s] ?? 0);
    }),
    rt.approvals.pendingCount().then((n) => rt.metrics.approvalsPending.set(n)),
  ]);
}

/**
 * Cancellation crosses processes: `deepq cancel` publishes the goal id; every process aborts
 * its running jobs of that goal (the AbortSignal reaches the SDK call). Pub/sub delivers at most
 * once: a cancel published while this subscriber was reconnecting is lost, so on every reconnect
 * the goals of the running jobs are read, and the jobs of those that ended are cancelled too.
 */
async function listenForCancels(
  rt: Runtime,
  opts: Pick<ServiceOptions, 'name' | 'onCancel'>,
  active: ActiveRuns,
): Promise<Redis> {
  const sub = createRedis(rt.cfg.redisUrl, `deepq:${opts.name}:sub`);
  const cancel = (goalId: string) => {
    for (const jobId of active.abortGoal(goalId, 'goal cancelled')) {
      rt.logger.info({ goalId, jobId }, 'cancelling running job');
    }
    opts.onCancel?.(goalId);
  };
  await sub.subscribe(rt.goals.keys.cancelChannel());
  sub.on('message', (_channel, goalId: string) => cancel(goalId));
  sub.on('ready', () => {
    cancelEndedGoals(rt, active, cancel).catch((err: Error) =>
      rt.logger.warn({ err: { message: err.message } }, 'could not check running goals after a reconnect'),
    );
  });
  return sub;
}

/** Cancels the running jobs of every goal that ended (or is gone): a missed cancel's effect. */
async function cancelEndedGoals(rt: Runtime, active: ActiveRuns, cancel: (goalId: string) => void): Promise<void> {
  const goalIds = active.goalIds();
  const statuses = await Promise.all(goalIds.map((id) => rt.redis.hget(rt.goals.keys.goal(id), 'status')));
  goalIds.forEach((id, i) => {
    const status = statuses[i];
    if (!status || isTerminal(status)) cancel(id);
  });
}

interface Closable {
  workers: Worker[];
  active: ActiveRuns;
  sub: Redis;
  server: Server;
}

/** Stops taking jobs, lets running ones finish up to the drain timeout, hands back the rest. */
async function drainAndClose(rt: Runtime, c: Closable): Promise<void> {
  const log = rt.logger;
  log.info({ active: c.active.size, drainTimeoutMs: rt.cfg.drainTimeoutMs }, 'draining');
  const closing = Promise.all(c.workers.map((w) => w.close()));
  const drained = await Promise.race([
    closing.then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), rt.cfg.drainTimeoutMs).unref()),
  ]);
  if (!drained) await handBack(rt, c);
  await c.sub.quit().catch(() => c.sub.disconnect());
  await new Promise<void>((r) => c.server.close(() => r()));
  await rt.close();
  await stopTracing();
  log.info('stopped');
}

/**
 * Aborts what did not finish: each job's processor then returns it to the queue untouched (not
 * counted as a stall, nor as a failed attempt; see instrumented). A handler that ignores the
 * abort finishes its job as usual, never handed back while it still runs.
 */
async function handBack(rt: Runtime, c: Closable): Promise<void> {
  rt.logger.warn({ active: c.active.size }, 'drain timeout: handing active jobs back');
  c.active.abortAll(SHUTDOWN);
  await Promise.all(c.workers.map((w) => w.close(true).catch(() => {})));
}

/** The abort reason of jobs stopped by a shutdown's drain timeout. */
const SHUTDOWN = 'shutdown';
/** The abort reason of a job whose lock was lost: another delivery of it goes on. */
const LOCK_LOST = 'lock lost';

/**
 * A job its process aborted at the drain timeout goes back to wait before its processor
 * settles, and says so (WaitingError): BullMQ then neither fails the attempt nor completes it.
 * (Moved back after its processor failed, it would have used an attempt: a reflection's last
 * one fails its goal.) Null when the job was not stopped by the shutdown.
 */
async function handedBack(rt: Runtime, job: Job, token: string | undefined, signal: AbortSignal | undefined) {
  if (!signal?.aborted || signal.reason !== SHUTDOWN || !token) return null;
  try {
    await job.moveToWait(token);
  } catch (err) {
    const fields = { jobId: job.id, err: { message: (err as Error).message } };
    rt.logger.warn(fields, 'hand-back failed; the stalled check will recover it');
    return null;
  }
  return new WaitingError();
}

/**
 * SIGTERM / SIGINT → drain and exit 0; a second signal exits at once. A process started with
 * an IPC channel (`deepq up`) drains the same way when the channel closes: its supervisor is
 * gone (even SIGKILLed), and nobody would stop or restart it any more.
 */
export function stopOnSignals(svc: { stop(): Promise<void>; drainTimeoutMs: number }, logger: Runtime['logger']): void {
  let signals = 0;
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // A drain that cannot reach Redis must not hang forever: past the drain timeout plus a
    // grace period, exit anyway (non-zero; the stalled-job check recovers what was running).
    setTimeout(() => {
      logger.error('shutdown did not finish in time (is Redis reachable?): exiting');
      process.exit(1);
    }, svc.drainTimeoutMs + 10_000).unref();
    svc.stop().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const onSignal = (sig: string) => {
    // Only a second signal cuts the drain short: the supervisor's SIGTERM racing its own
    // channel closing is one request to stop, not two.
    if (++signals > 1) {
      logger.warn({ sig }, 'second signal: exiting now');
      process.exit(1);
    }
    stop();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // A stop asked for while the service started (start-signals.ts): carried out now.
  const early = takeStartSignal();
  if (early) onSignal(early);
  // Spawned with a channel (process.send exists): follow the supervisor's lifetime.
  if (typeof process.send !== 'function') return;
  const orphaned = () => {
    // `deepq up` stopping (its channel closed on purpose), or killed outright.
    logger.warn(
      { alreadyStopping: stopping },
      'supervisor gone or stopping (IPC channel closed): draining and exiting',
    );
    stop();
  };
  // The supervisor may have died while this process was starting up.
  if (!process.connected || !process.channel) {
    orphaned();
    return;
  }
  // The channel only reports the parent leaving; it must not keep the process alive itself.
  process.channel.unref();
  if (exitOrphanedStart) process.off('disconnect', exitOrphanedStart);
  process.once('disconnect', orphaned);
}

/**
 * Before stopOnSignals takes over: a supervisor that leaves while this process still waits for
 * Redis (nothing started, nothing to drain) ends it at once, or it would wait for ever.
 */
function exitIfOrphanedWhileStarting(logger: Runtime['logger']): void {
  if (typeof process.send !== 'function') return;
  exitOrphanedStart ??= () => {
    // Nothing ran yet: stopped as asked (or left behind), not a failure.
    logger.warn('supervisor gone (IPC channel closed) before this service started: exiting');
    process.exit(0);
  };
  // Gone already, while this process loaded its modules: the event will not come again.
  if (!process.connected) exitOrphanedStart();
  process.once('disconnect', exitOrphanedStart);
}

/** The start's listener for the supervisor leaving; stopOnSignals replaces it with a drain. */
let exitOrphanedStart: (() => void) | undefined;
