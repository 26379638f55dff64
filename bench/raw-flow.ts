// The raw BullMQ flow the throughput figures compare deepq with: the same job graph per goal
// (2 plans, 3 subtasks, 2 reflections) with no-op processors. Run in the bench's own process
// (the reference of the targets), or split over 5 processes the way deepq's services are (one
// per queue: plan, reflect and one per subtask queue), which bounds what any system with
// deepq's process layout can reach on the same machine.
//
// As a script (`node --import tsx bench/raw-flow.ts worker <queue> <redisUrl>`) it is one of
// the split variant's worker processes.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FlowProducer, type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { commandStats, processCpuMs, steadyRate } from './common.ts';

const PREFIX = 'rawbench';
const OPTS = { removeOnComplete: { age: 3600 } };
const QUEUES = ['plan', 'reflect', 'sub-research', 'sub-code', 'sub-critic'];
const DONE_LIST = `${PREFIX}:done`;
/** Goals in flight in the closed loop, as in deepq's (bench/common.ts runGoals). */
const IN_FLIGHT = 64;

/** The processor of each queue; a goal's last reflection calls `done`. */
function processors(conn: Redis, done: (goalId: string) => Promise<void>) {
  const flows = new FlowProducer({ connection: conn, prefix: PREFIX });
  const planQ = new Queue('plan', { connection: conn, prefix: PREFIX });
  const plan = async (job: Job) => {
    const { goalId, step } = job.data;
    const kids = step === 1 ? ['research', 'code'] : ['critic'];
    await flows.add({
      name: 'reflect',
      queueName: 'reflect',
      data: { goalId, step },
      opts: { ...OPTS, jobId: `${goalId}:${step}:reflect` },
      children: kids.map((k, i) => ({
        name: k,
        queueName: `sub-${k}`,
        data: { goalId, step, i },
        opts: { ...OPTS, jobId: `${goalId}:${step}:${i}`, ignoreDependencyOnFailure: true },
      })),
    });
  };
  const reflect = async (job: Job) => {
    const { goalId, step } = job.data;
    await job.getChildrenValues();
    if (step === 1) await planQ.add('plan', { goalId, step: 2 }, { ...OPTS, jobId: `${goalId}:2:plan` });
    else await done(goalId);
  };
  const noop = async () => ({ ok: true });
  return {
    of: (queue: string) => (queue === 'plan' ? plan : queue === 'reflect' ? reflect : noop),
    close: () => Promise.all([flows.close(), planQ.close()]),
  };
}

/** A closed loop of IN_FLIGHT goals, `n` in all; `finished(goalId)` resolves when that goal is done. */
async function closedLoop(conn: Redis, n: number, finished: (goalId: string) => Promise<void>): Promise<number> {
  const planQ = new Queue('plan', { connection: conn, prefix: PREFIX });
  const at: number[] = [];
  let started = 0;
  const one = async (): Promise<void> => {
    const goalId = `raw${started++}x${Date.now().toString(36)}`;
    const done = finished(goalId); // waiting before the goal can finish
    await planQ.add('plan', { goalId, step: 1 }, { ...OPTS, jobId: `${goalId}:1:plan` });
    await done;
    at.push(Date.now());
    if (started < n) await one();
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, n) }, () => one()));
  await planQ.close();
  return steadyRate(at, IN_FLIGHT);
}

/** In the bench's process: in-process workers, completions seen in-process. */
export async function rawInProcessGoalsPerSecond(url: string, n: number): Promise<number> {
  const conn = new Redis(url, { maxRetriesPerRequest: null });
  const waiting = new Map<string, () => void>();
  const p = processors(conn, async (goalId) => waiting.get(goalId)?.());
  const workers = QUEUES.map((q) => new Worker(q, p.of(q), { connection: conn, prefix: PREFIX, concurrency: 8 }));
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const gps = await closedLoop(conn, n, (goalId) => new Promise<void>((r) => waiting.set(goalId, r)));
  await Promise.all(workers.map((w) => w.close()));
  await p.close();
  conn.disconnect();
  return gps;
}

/**
 * Split over 5 worker processes, one per queue like deepq's services; the last reflection
 * pushes the goal id to a list the loop pops. Returns goals/s, the workers' CPU per goal and the
 * Redis commands per goal (Lua-internal ones included, as the in-process figure counts them).
 */
export async function rawSplitGoalsPerSecond(
  url: string,
  n: number,
  warmUp: number,
): Promise<{ gps: number; cpuMsPerGoal: number; commandsPerGoal: number }> {
  const self = fileURLToPath(import.meta.url);
  const procs: ChildProcess[] = QUEUES.map((q) =>
    spawn(process.execPath, ['--import', 'tsx', self, 'worker', q, url], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    }),
  );
  try {
    await Promise.all(procs.map((c) => new Promise((r, j) => c.once('message', r).once('exit', j))));
    const conn = new Redis(url, { maxRetriesPerRequest: null });
    const waiting = new Map<string, () => void>();
    const popper = new Redis(url, { maxRetriesPerRequest: null });
    let popping = true;
    const pop = (async () => {
      while (popping) {
        const r = await popper.blpop(DONE_LIST, 1);
        if (r) waiting.get(r[1])?.();
        if (r) waiting.delete(r[1]);
      }
    })();
    const finished = (goalId: string) => new Promise<void>((r) => waiting.set(goalId, r));
    await closedLoop(conn, warmUp, finished);
    const pids = procs.map((c) => c.pid!);
    const cpu0 = processCpuMs(pids);
    const cmd0 = await commandStats(conn);
    const gps = await closedLoop(conn, n, finished);
    const cpuMsPerGoal = (processCpuMs(pids) - cpu0) / n;
    // Less the loop's own completion signal (an RPUSH and a BLPOP per goal).
    const commandsPerGoal = ((await commandStats(conn)).calls - cmd0.calls) / n - 2;
    popping = false;
    await pop;
    popper.disconnect();
    conn.disconnect();
    return { gps, cpuMsPerGoal, commandsPerGoal };
  } finally {
    for (const c of procs) c.kill('SIGTERM');
    await Promise.all(procs.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  }
}

async function workerMain(queue: string, url: string): Promise<void> {
  const conn = new Redis(url, { maxRetriesPerRequest: null });
  const p = processors(conn, async (goalId) => void (await conn.rpush(DONE_LIST, goalId)));
  const w = new Worker(queue, p.of(queue), { connection: conn, prefix: PREFIX, concurrency: 8 });
  await w.waitUntilReady();
  process.send?.('ready');
  process.once('SIGTERM', () => {
    void w.close().finally(() => process.exit(0));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === 'worker') {
  await workerMain(process.argv[3]!, process.argv[4]!);
}
