// The scale curve: deepq's throughput and Redis memory with 64, 1,000 and 10,000 goals in flight
// (zero model latency, the scripted model, one process per service, one Redis).
//
// - 64 in flight is the throughput figure's closed loop (a new goal as each finishes), run just
//   before and just after the largest backlog, on warm processes (a cold one spends about twice the
//   CPU per goal): their mean is the reference, their difference the drift of a shared machine.
// - A backlog of N is N goals enqueued while the plan queue is paused (Redis used_memory per queued
//   goal is read then), released at once and drained. Its throughput is N over the time from the
//   release to the last goal done; its work rate per tenth of that time (jobs finished ÷ jobs per
//   goal, in goals/s) shows whether a long backlog slows the queue down as it drains.
// - CPU per goal (the services' processes and redis-server, from /proc and INFO) moves far less with
//   the machine's other tenants than goals/s do: it says whether a goal costs more with a long backlog.
import { Redis } from 'ioredis';
import type { GoalClient } from '../cli/goal-client.ts';
import { PLAN_QUEUE, planJobId, REFLECT_QUEUE, subagentQueueName } from '../shared/runtime/queues.ts';
import { type Fleet, startFleet } from '../testing/fleet.ts';
import {
  commandStats,
  enqueueMany,
  loadAverage,
  log,
  pct,
  processCpuMs,
  quick,
  redisCpuMs,
  round,
  runGoals,
  sleep,
  usedMemory,
} from './common.ts';

export const BACKLOGS = quick ? [64, 500, 2000] : [64, 1000, 10_000];
const LOOP_GOALS = quick ? 150 : 300;
/** Goals run before anything is measured: the services' code is hot (JIT) by then. */
const WARM_UP_GOALS = quick ? 100 : 200;
const TERMINAL = new Set(['done', 'failed', 'cancelled', 'budget_exceeded', 'awaiting_human']);
/** A drain with no job finishing for this long is stuck: the bench says so rather than wait. */
const STUCK_MS = 60_000;

interface GoalEnd {
  status: string;
  finishedAt: number;
}

/** One HMGET per goal: the bench's own commands, counted by the caller. */
async function readGoals(client: GoalClient, ids: string[]): Promise<GoalEnd[]> {
  const out: GoalEnd[] = [];
  for (let i = 0; i < ids.length; i += 2000) {
    const p = client.redis.pipeline();
    for (const id of ids.slice(i, i + 2000)) p.hmget(client.goals.keys.goal(id), 'status', 'finishedAt');
    for (const [, row] of (await p.exec()) ?? []) {
      const [status, finishedAt] = row as (string | null)[];
      out.push({ status: status ?? 'gone', finishedAt: Number(finishedAt ?? 0) });
    }
  }
  return out;
}

/** When each job of these queues finished at or after `since` (the completed sets' scores). */
async function jobFinishTimes(r: Redis, prefix: string, queues: string[], since: number): Promise<number[]> {
  const times: number[] = [];
  for (const q of queues) {
    const flat = await r.zrangebyscore(`${prefix}:${q}:completed`, since, '+inf', 'WITHSCORES');
    for (let i = 1; i < flat.length; i += 2) times.push(Number(flat[i]));
  }
  return times.sort((a, b) => a - b);
}

/** Bytes of one queued goal's own keys (MEMORY USAGE): what a queued goal is made of. */
async function queuedGoalKeys(r: Redis, prefix: string, goalId: string) {
  const bytes = async (key: string) => Number((await r.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
  return {
    goal_hash: await bytes(`${prefix}:goal:${goalId}`),
    events_stream: await bytes(`${prefix}:goal:${goalId}:events`),
    plan_job_hash: await bytes(`${prefix}:${PLAN_QUEUE}:${planJobId(goalId, 1)}`),
  };
}

/** CPU time (ms) of the fleet's service processes and of Redis so far: the work the goals cost. */
type CpuClock = () => Promise<{ services: number; redis: number; total: number }>;

function cpuClock(fleet: Fleet, r: Redis): CpuClock {
  const pids = fleet.procs.map((p) => p.proc.pid!);
  return async () => {
    const [services, redis] = [processCpuMs(pids), await redisCpuMs(r)];
    return { services, redis, total: services + redis };
  };
}

/** CPU ms per goal between two readings, in all and split. */
const cpuPerGoal = (a: { services: number; redis: number }, b: { services: number; redis: number }, n: number) => ({
  total: round((b.services + b.redis - a.services - a.redis) / n, 1),
  services: round((b.services - a.services) / n, 1),
  redis: round((b.redis - a.redis) / n, 1),
});

/** The CPU clock's reading at time t, between two samples (linear). */
function cpuAt(samples: { t: number; cpu: number }[], t: number): number {
  const i = samples.findIndex((s) => s.t >= t);
  if (i <= 0) return samples[i < 0 ? samples.length - 1 : 0]!.cpu;
  const [a, b] = [samples[i - 1]!, samples[i]!];
  return a.cpu + ((b.cpu - a.cpu) * (t - a.t)) / Math.max(1, b.t - a.t);
}

/**
 * Jobs alive and finished in `queues`: one LLEN or ZCARD per state and queue, plain commands the
 * caller counts as the bench's own (BullMQ's getJobCounts runs a script whose inner commands
 * INFO commandstats counts too, so they could not be told from deepq's).
 */
export async function jobCounts(
  client: GoalClient,
  queues: string[],
): Promise<{ live: number; finished: number; commands: number }> {
  const p = client.redis.pipeline();
  for (const q of queues) {
    const k = client.queues.get(q).keys;
    p.llen(k.wait).llen(k.active).zcard(k.delayed).zcard(k.prioritized).zcard(k['waiting-children']);
    p.zcard(k.completed).zcard(k.failed);
  }
  const n = ((await p.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return Number(v);
  });
  let [live, finished] = [0, 0];
  for (let i = 0; i < n.length; i += 7) {
    live += n[i]! + n[i + 1]! + n[i + 2]! + n[i + 3]! + n[i + 4]!;
    finished += n[i + 5]! + n[i + 6]!;
  }
  return { live, finished, commands: n.length };
}

/**
 * Polls until no job of `queues` is alive and every goal has ended. Samples the peak used_memory
 * and the CPU clock meanwhile (INFO, which commandStats leaves out). Returns the Redis commands
 * it sent, which are the bench's, not deepq's.
 */
async function waitDrained(fleet: Fleet, r: Redis, queues: string[], ids: string[], cpu: CpuClock) {
  let peak = 0;
  let finishedBefore = -1;
  let progressAt = Date.now();
  let pollCommands = 0;
  const samples = [{ t: Date.now(), cpu: (await cpu()).total }];
  for (;;) {
    await sleep(250);
    samples.push({ t: Date.now(), cpu: (await cpu()).total });
    peak = Math.max(peak, await usedMemory(r));
    const { live, finished, commands } = await jobCounts(fleet.client, queues);
    pollCommands += commands;
    if (finished !== finishedBefore) [finishedBefore, progressAt] = [finished, Date.now()];
    if (live === 0) {
      const goals = await readGoals(fleet.client, ids);
      pollCommands += ids.length;
      if (goals.every((g) => TERMINAL.has(g.status))) return { goals, peak, samples, pollCommands };
    }
    if (Date.now() - progressAt > STUCK_MS)
      throw new Error(`backlog of ${ids.length}: no job finished for ${STUCK_MS / 1000} s, ${live} jobs alive`);
  }
}

/**
 * Work done per tenth of a drain from `releasedAt` to `end`, in goals/s (jobs finished ÷ jobs per
 * goal ÷ seconds) and in goals per CPU second (the same ÷ the CPU the services and Redis used in that tenth).
 */
function workByTenth(
  jobs: number[],
  jobsPerGoal: number,
  samples: { t: number; cpu: number }[],
  releasedAt: number,
  end: number,
) {
  const tenth = (end - releasedAt) / 10;
  const perTenth = Array.from({ length: 10 }, () => 0);
  for (const t of jobs) perTenth[Math.min(9, Math.floor((t - releasedAt) / tenth))]!++;
  const rate = perTenth.map((k) => round(k / jobsPerGoal / (tenth / 1000), 1));
  const perCpuSecond = perTenth.map((k, i) => {
    const used = cpuAt(samples, releasedAt + (i + 1) * tenth) - cpuAt(samples, releasedAt + i * tenth);
    return round(k / jobsPerGoal / Math.max(0.001, used / 1000), 1);
  });
  return { rate, perCpuSecond };
}

/** N goals queued behind a paused plan queue, released at once, drained to the last one. */
async function drainBacklog(fleet: Fleet, r: Redis, n: number) {
  const { client, cfg } = fleet;
  const cpu = cpuClock(fleet, r);
  const queues = [PLAN_QUEUE, REFLECT_QUEUE, ...cfg.roles.map((x) => subagentQueueName(x.name))];
  const planQueue = client.queues.get(PLAN_QUEUE);
  await planQueue.pause();
  const [mem0, keys0, cmd0, cpu0] = [await usedMemory(r), await r.dbsize(), await commandStats(r), await cpu()];
  const t0 = performance.now();
  const driver0 = process.cpuUsage();
  const ids = await enqueueMany(client, n, `Backlog of ${n}, goal`);
  const enqueueSeconds = (performance.now() - t0) / 1000;
  const [memQueued, keysQueued] = [await usedMemory(r), await r.dbsize()];
  const perKey = await queuedGoalKeys(r, cfg.prefix, ids[0]!);
  // The bench's own commands since cmd0: the DBSIZE and the 3 MEMORY USAGE just sent, then its polling.
  let benchCommands = 4;
  const releasedAt = Date.now();
  await planQueue.resume();
  const { goals, peak, samples, pollCommands } = await waitDrained(fleet, r, queues, ids, cpu);
  benchCommands += pollCommands;
  const [cmd1, cpu1, memAfter] = [await commandStats(r), await cpu(), await usedMemory(r)];
  const driver = process.cpuUsage(driver0);
  const done = goals.filter((g) => g.status === 'done');
  const end = Math.max(...done.map((g) => g.finishedAt));
  const seconds = (end - releasedAt) / 1000;
  const jobs = (await jobFinishTimes(r, cfg.prefix, queues, releasedAt)).filter((t) => t <= end);
  const jobsPerGoal = jobs.length / n;
  const { rate, perCpuSecond } = workByTenth(jobs, jobsPerGoal, samples, releasedAt, end);
  const latencies = done.map((g) => (g.finishedAt - releasedAt) / 1000);
  return {
    in_flight: n,
    goals_per_second: round(done.length / seconds, 1),
    drain_seconds: round(seconds, 1),
    not_done: n - done.length,
    work_rate_by_tenth: rate,
    goals_per_cpu_second_by_tenth: perCpuSecond,
    first_tenth_vs_last: round(rate[0]! / rate[9]!),
    cpu_ms_per_goal: cpuPerGoal(cpu0, cpu1, n),
    driver_cpu_ms_per_goal: round((driver.user + driver.system) / 1000 / n, 2),
    jobs_per_goal: round(jobsPerGoal, 2),
    goal_latency_s: {
      first_done: round(Math.min(...latencies), 1),
      p50: round(pct(latencies, 50), 1),
      max: round(Math.max(...latencies), 1),
    },
    enqueue_goals_per_second: Math.round(n / enqueueSeconds),
    redis: {
      used_memory_per_queued_goal_bytes: Math.round((memQueued - mem0) / n),
      keys_per_queued_goal: round((keysQueued - keys0) / n, 1),
      queued_goal_key_bytes: perKey,
      queued_mib: round((memQueued - mem0) / 2 ** 20, 1),
      peak_during_drain_mib: round((peak - mem0) / 2 ** 20, 1),
      retained_per_finished_goal_bytes: Math.round((memAfter - mem0) / n),
      // deepq's alone: the bench's own commands (its polling, its reads of the goals) left out.
      commands_per_goal: Math.round((cmd1.calls - cmd0.calls - benchCommands) / n),
      bench_commands_per_goal: round(benchCommands / n, 2),
      cpu_us_per_goal: Math.round((cmd1.usec - cmd0.usec) / n),
    },
  };
}

/** The closed loop of 64 in flight: its steady rate and the CPU its goals cost. */
async function closedLoop(fleet: Fleet, r: Redis, label: string) {
  const cpu = cpuClock(fleet, r);
  const [cpu0, cmd0, driver0] = [await cpu(), await commandStats(r), process.cpuUsage()];
  const { rate, pollCommands } = await runGoals(fleet, LOOP_GOALS, label);
  const driver = process.cpuUsage(driver0);
  return {
    rate,
    commandsPerGoal: Math.round(((await commandStats(r)).calls - cmd0.calls) / LOOP_GOALS),
    pollCommandsPerGoal: round(pollCommands / LOOP_GOALS, 2),
    cpu: cpuPerGoal(cpu0, await cpu(), LOOP_GOALS),
    driverCpuMsPerGoal: round((driver.user + driver.system) / 1000 / LOOP_GOALS, 2),
  };
}

type Drain = Awaited<ReturnType<typeof drainBacklog>>;
type ClosedLoop = Awaited<ReturnType<typeof closedLoop>>;

/** The curve: each level's goals/s, CPU and memory per goal, the largest backlog against the 64 loops' mean. */
function scaleReport(drains: Drain[], before: ClosedLoop, after: ClosedLoop, load: { start: number[]; end: number[] }) {
  const at64 = (before.rate + after.rate) / 2;
  const cpu64 = (before.cpu.total + after.cpu.total) / 2;
  const largest = drains.at(-1)!;
  const gps: Record<string, number> = { '64': round(at64, 1) };
  const cpuByLevel: Record<string, number> = { '64': round(cpu64, 1) };
  const memory: Record<string, number> = {};
  for (const d of drains) {
    memory[String(d.in_flight)] = d.redis.used_memory_per_queued_goal_bytes;
    if (d.in_flight === 64) continue;
    gps[String(d.in_flight)] = d.goals_per_second;
    cpuByLevel[String(d.in_flight)] = d.cpu_ms_per_goal.total;
  }
  return {
    largest: largest.in_flight,
    throughput_ratio_largest_vs_64: round(largest.goals_per_second / at64),
    target_ratio: 0.8,
    goals_per_second: gps,
    cpu_ms_per_goal: cpuByLevel,
    cpu_ratio_largest_vs_64: round(largest.cpu_ms_per_goal.total / cpu64),
    redis_memory_per_queued_goal_bytes: memory,
    closed_loop_64: {
      goals_per_second: { before: round(before.rate, 1), after: round(after.rate, 1) },
      cpu_ms_per_goal: { before: before.cpu, after: after.cpu },
      driver_cpu_ms_per_goal: { before: before.driverCpuMsPerGoal, after: after.driverCpuMsPerGoal },
      // The loop's own polling is in these (runGoals: a ZMSCORE of the goals in flight every 10 ms,
      // an HMGET per goal that left the live set, and every 50th poll one per goal in flight);
      // bench_poll_commands_per_goal is that share.
      redis_commands_per_goal: { before: before.commandsPerGoal, after: after.commandsPerGoal },
      bench_poll_commands_per_goal: { before: before.pollCommandsPerGoal, after: after.pollCommandsPerGoal },
      goals: LOOP_GOALS,
    },
    backlogs: drains,
    load_average: load,
    note:
      'zero model latency, scripted model, one process per service (concurrency 8); 64 = the closed loop ' +
      `(mean of just before and just after the largest backlog, after ${WARM_UP_GOALS} goals of warm-up and ` +
      'the smaller backlogs); N ≥ 1000 = N goals queued behind a paused plan queue, ' +
      'released at once: N / (release → last goal done); work_rate_by_tenth = jobs finished per tenth of ' +
      "the drain ÷ jobs per goal ÷ seconds; memory = used_memory's growth while the N goals were queued; " +
      "a backlog's commands_per_goal leaves out the bench's own (bench_commands_per_goal: its polling, " +
      "7 LLEN/ZCARD per queue every 250 ms, and an HMGET per goal); the closed loop's include its polling; " +
      'cpu = user + system time of the 5 service processes and redis-server; driver = this process ' +
      '(enqueueing, and polling: every 10 ms in the closed loop, every 250 ms in a drain)',
  };
}

export async function benchScale(url: string) {
  const r = new Redis(url);
  const fleet = await startFleet(url, { LOG_LEVEL: 'warn' });
  const load = { start: loadAverage(), end: [] as number[] };
  try {
    await runGoals(fleet, WARM_UP_GOALS, 'Warm-up');
    // The smaller backlogs first: they warm the services further, so that the loops on either
    // side of the largest backlog (the figure's two terms) run on processes equally hot.
    const drains = [];
    for (const n of BACKLOGS.slice(0, -1)) {
      log(`  a backlog of ${n} goals…`);
      drains.push(await drainBacklog(fleet, r, n));
    }
    log(`  64 in flight, closed loop of ${LOOP_GOALS} goals…`);
    const before = await closedLoop(fleet, r, 'Closed loop before');
    log(`  a backlog of ${BACKLOGS.at(-1)} goals…`);
    drains.push(await drainBacklog(fleet, r, BACKLOGS.at(-1)!));
    log('  64 in flight again…');
    const after = await closedLoop(fleet, r, 'Closed loop after');
    load.end = loadAverage();
    return scaleReport(drains, before, after, load);
  } finally {
    await fleet.stop();
    r.disconnect();
  }
}
