// Runs one queue consumer as a service: the BullMQ worker, its ops endpoints, queue-depth
// gauges, cross-process cancellation, and a graceful drain on SIGTERM.
import { Worker, type Job, type Processor } from 'bullmq';
import type { Runtime } from './runtime.ts';
import { startOpsServer } from './ops-server.ts';
import { pingRedis, createRedis } from './redis.ts';
import { scrubSecrets } from './logger.ts';

export type JobHandler = (job: Job, signal: AbortSignal) => Promise<unknown>;

export interface ServiceOptions {
  rt: Runtime;
  name: string;
  queueName: string;
  role: string;
  concurrency: number;
  handler: JobHandler;
  /** Queues whose depth this process reports (default: its own). */
  reportQueues?: string[];
  /**
   * Lets a 429 pause the queue (queue.rateLimit). BullMQ applies a manual rate limit only
   * to workers with a limiter, so this sets one high enough never to bind by itself.
   */
  manualRateLimit?: boolean;
  /** Other queues this process also consumes (the reflector hosts the sweep). */
  sideQueues?: { queueName: string; role: string; concurrency: number; handler: JobHandler }[];
  /** Extra work after the worker starts (e.g. the sweep schedule). */
  onStart?: () => Promise<void>;
  /** Called when a job failed for good (attempts exhausted or unrecoverable). */
  onFinalFailure?: (job: Job, err: Error) => Promise<void>;
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
  const log = rt.logger;
  const active = new Map<string, { job: Job; token?: string; goalId?: string }>();
  let stopping = false;

  const makeProcessor = (queueName: string, role: string, handler: JobHandler): Processor => async (job, token, signal) => {
    const started = performance.now();
    const goalId = typeof job.data?.goalId === 'string' ? job.data.goalId : undefined;
    active.set(String(job.id), { job, token, goalId });
    try {
      const res = await handler(job, signal ?? new AbortController().signal);
      rt.metrics.jobs.inc({ queue: queueName, role, status: 'completed' });
      return res;
    } catch (err) {
      const status = (err as Error).name === 'RateLimitError' || (err as Error).message === 'bullmq:rateLimitExceeded' ? 'rate_limited' : 'failed';
      rt.metrics.jobs.inc({ queue: queueName, role, status });
      throw err;
    } finally {
      active.delete(String(job.id));
      rt.metrics.jobDuration.observe({ queue: queueName, role }, (performance.now() - started) / 1000);
    }
  };

  const workerOptions = {
    connection: rt.bull,
    prefix: rt.cfg.prefix,
    lockDuration: rt.cfg.lockDurationMs,
    stalledInterval: rt.cfg.stalledIntervalMs,
    maxStalledCount: rt.cfg.maxStalledCount,
    autorun: false,
  };
  const worker = new Worker(opts.queueName, makeProcessor(opts.queueName, opts.role, opts.handler), {
    ...workerOptions,
    concurrency: opts.concurrency,
    ...(opts.manualRateLimit ? { limiter: { max: 1_000_000, duration: 1000 } } : {}),
  });
  const sideWorkers = (opts.sideQueues ?? []).map((q) => {
    const w = new Worker(q.queueName, makeProcessor(q.queueName, q.role, q.handler), { ...workerOptions, concurrency: q.concurrency });
    w.on('error', (err) => log.error({ err: { message: scrubSecrets(err.message, rt.secrets) } }, 'worker error'));
    return w;
  });
  worker.on('error', (err) => log.error({ err: { message: scrubSecrets(err.message, rt.secrets) } }, 'worker error'));
  worker.on('failed', (job, err) => {
    if (!job) return;
    const final = err.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1);
    const fields = { goalId: job.data?.goalId, step: job.data?.step, role: opts.role, jobId: job.id, attempt: job.attemptsMade, final };
    log.warn({ ...fields, reason: scrubSecrets(err.message, rt.secrets) }, final ? 'job failed for good' : 'job failed, will retry');
    if (final) opts.onFinalFailure?.(job, err).catch((e) => log.error({ err: e }, 'final-failure hook failed'));
  });

  const queueNames = opts.reportQueues ?? [opts.queueName];
  const ops = await startOpsServer({
    port: rt.cfg.metricsPort,
    registry: rt.metrics.registry,
    async ready() {
      const redisOk = await pingRedis(rt.redis);
      const workerOk = worker.isRunning() && !stopping;
      return { ok: redisOk && workerOk, checks: { redis: redisOk, worker: workerOk } };
    },
    async beforeScrape() {
      for (const q of queueNames) {
        const counts = await rt.queues.get(q).getJobCounts(...QUEUE_STATES);
        for (const s of QUEUE_STATES) rt.metrics.queueJobs.set({ queue: q, state: s }, counts[s] ?? 0);
      }
    },
  });

  // The ops server is up before anything waits on Redis: /healthz answers while Redis is
  // away, and /readyz says so.
  // Cancellation crosses processes: `deepq cancel` publishes the goal id; every process
  // aborts its running jobs of that goal (the AbortSignal reaches the SDK call).
  const sub = createRedis(rt.cfg.redisUrl, `deepq:${opts.name}:sub`);
  await sub.subscribe(rt.goals.keys.cancelChannel());
  sub.on('message', (_channel, goalId: string) => {
    for (const [jobId, a] of active) {
      if (a.goalId === goalId) {
        log.info({ goalId, jobId }, 'cancelling running job');
        worker.cancelJob(jobId, 'goal cancelled');
      }
    }
  });

  for (const w of [worker, ...sideWorkers]) {
    void w.run().catch((err) => log.error({ err }, 'worker stopped'));
    await w.waitUntilReady();
  }
  await opts.onStart?.();
  log.info({ queue: opts.queueName, concurrency: opts.concurrency, metricsPort: ops.port, provider: rt.provider.name }, `${opts.name} started`);

  let stopped: Promise<void> | undefined;
  async function stop(): Promise<void> {
    if (stopped) return stopped;
    stopping = true;
    stopped = (async () => {
      log.info({ active: active.size, drainTimeoutMs: rt.cfg.drainTimeoutMs }, 'draining');
      const closing = Promise.all([worker, ...sideWorkers].map((w) => w.close()));
      const drained = await Promise.race([
        closing.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), rt.cfg.drainTimeoutMs).unref()),
      ]);
      if (!drained) {
        // Hand back what did not finish: abort it and return it to the queue untouched.
        log.warn({ active: active.size }, 'drain timeout: handing active jobs back');
        const pending = [...active.values()];
        for (const w of [worker, ...sideWorkers]) w.cancelAllJobs('shutdown');
        for (const a of pending) {
          if (a.token) await a.job.moveToWait(a.token).catch((e) => log.warn({ jobId: a.job.id, err: { message: (e as Error).message } }, 'hand-back failed; the stalled check will recover it'));
        }
        await Promise.all([worker, ...sideWorkers].map((w) => w.close(true).catch(() => {})));
      }
      await sub.quit().catch(() => sub.disconnect());
      await new Promise<void>((r) => ops.server.close(() => r()));
      await rt.close();
      log.info('stopped');
    })();
    return stopped;
  }
  return { worker, port: ops.port, drainTimeoutMs: rt.cfg.drainTimeoutMs, stop };
}

/** SIGTERM / SIGINT → drain and exit 0. */
export function stopOnSignals(svc: { stop(): Promise<void>; drainTimeoutMs: number }, logger: Runtime['logger']): void {
  let n = 0;
  const onSignal = (sig: string) => {
    if (++n > 1) {
      logger.warn({ sig }, 'second signal: exiting now');
      process.exit(1);
    }
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
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

