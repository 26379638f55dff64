// What the bench's sections share: the quick flag, statistics, Redis counters and the closed
// loop of goals that the throughput figures run.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { Redis } from 'ioredis';
import type { GoalClient } from '../cli/goal-client.ts';
import type { Fleet } from '../testing/fleet.ts';

/** `--quick` (or DEEPQ_BENCH_QUICK=1): fewer goals and samples, for development. */
export const quick = process.argv.includes('--quick') || process.env.DEEPQ_BENCH_QUICK === '1';
export const log = (s: string) => process.stderr.write(`bench: ${s}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** Nearest-rank percentile (p99 of 50 samples is the largest). */
export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
export const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * Steady-state rate of a closed loop of `inFlight` goals from its completion times: the
 * completions while the loop was full, over the time they took. The first 10 % are the pipeline
 * filling (one goal is 7 jobs in a chain). The last `inFlight - 1` are the drain: once the loop
 * has started its last goal, each completion leaves one goal fewer in flight. A run too short to
 * have such a stretch (n ≤ inFlight + 10 or so) has no steady state: its rate is the middle 80 %
 * of the batch, drain included.
 */
export function steadyRate(finishedAt: number[], inFlight: number): number {
  const t = [...finishedAt].sort((a, b) => a - b);
  if (t.length < 10) return t.length / Math.max(0.001, (t[t.length - 1]! - t[0]!) / 1000);
  const lo = Math.floor(t.length * 0.1);
  // Completion n - inFlight + 1 (index n - inFlight) is the last one the full loop made.
  let hi = t.length - Math.max(1, inFlight);
  if (hi - lo < 10) hi = Math.ceil(t.length * 0.9) - 1;
  return (hi - lo) / Math.max(0.001, (t[hi]! - t[lo]!) / 1000);
}

/**
 * A closed loop: `inFlight` goals at a time, a new one as each finishes, `n` in all. The
 * rate counts the completions while the loop was full (steadyRate): not the fill, nor the drain.
 */
export async function runGoals(
  fleet: Fleet,
  n: number,
  goal = 'Benchmark goal',
  inFlight = 64,
): Promise<{ seconds: number; rate: number; ids: string[]; pollCommands: number }> {
  const t0 = performance.now();
  // The driver's own status reads: not deepq's work, so the Redis figures leave them out.
  let pollCommands = 0;
  const ids: string[] = [];
  const live = new Set<string>();
  const finished: number[] = [];
  const keys = fleet.client.goals.keys;
  for (let poll = 0; finished.length < n; poll++) {
    while (live.size < inFlight && ids.length < n) {
      const id = await fleet.client.enqueue({ goal: `${goal} ${ids.length}` });
      ids.push(id);
      live.add(id);
    }
    // One ZMSCORE over the live-goals set finds the goals that ended (they leave it); every
    // 50th poll reads every goal, so one waiting for a human fails the run instead of hanging.
    const batch = [...live];
    const scores = await fleet.client.redis.zmscore(keys.liveGoals(), ...batch);
    pollCommands++;
    const ended = poll % 50 === 49 ? batch : batch.filter((_, i) => scores[i] === null);
    if (ended.length) pollCommands += await readEnded(fleet, ended, live, finished);
    await sleep(10);
  }
  return { seconds: (performance.now() - t0) / 1000, rate: steadyRate(finished, inFlight), ids, pollCommands };
}

/** Reads the status of goals that may have ended; a done one leaves `live`, a stuck one throws. */
async function readEnded(fleet: Fleet, ids: string[], live: Set<string>, finished: number[]): Promise<number> {
  const p = fleet.client.redis.pipeline();
  for (const id of ids) p.hmget(fleet.client.goals.keys.goal(id), 'status', 'finishedAt', 'reason');
  const res = (await p.exec()) ?? [];
  ids.forEach((id, i) => {
    const [status, finishedAt, reason] = res[i]![1] as (string | null)[];
    if (status === 'done') {
      live.delete(id);
      finished.push(Number(finishedAt));
    } else if (status && ['failed', 'cancelled', 'budget_exceeded', 'awaiting_human'].includes(status)) {
      throw new Error(`goal ${id} ended ${status}: ${reason}`);
    }
  });
  return ids.length;
}

/** `n` goals enqueued as fast as `parallel` producers go; their ids in order. */
export async function enqueueMany(client: GoalClient, n: number, goal: string, parallel = 32): Promise<string[]> {
  const ids: string[] = new Array(n);
  let next = 0;
  const producer = async () => {
    for (let i = next++; i < n; i = next++) ids[i] = await client.enqueue({ goal: `${goal} ${i}` });
  };
  await Promise.all(Array.from({ length: Math.min(parallel, n) }, producer));
  return ids;
}

/** Redis commands (Lua-internal ones included) and their CPU time so far, without resetting them. */
export async function commandStats(r: Redis): Promise<{ calls: number; usec: number }> {
  const info = await r.info('commandstats');
  let calls = 0;
  let usec = 0;
  for (const m of info.matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)) {
    if (m[1]!.startsWith('config') || m[1] === 'info') continue;
    calls += Number(m[2]);
    usec += Number(m[3]);
  }
  return { calls, usec };
}

export async function usedMemory(r: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await r.info('memory'))?.[1] ?? 0);
}

/** The 1, 5 and 15-minute load averages (the machine is shared: the figures depend on it). */
export const loadAverage = () => loadavg().map((x) => round(x));

/** User + system CPU time (ms) these processes have used so far, from /proc/<pid>/stat (Linux). */
export function processCpuMs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // After "(comm) ", field 3 (the state) is at index 0: utime (14) and stime (15) at 11 and 12.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      /* gone, or not Linux */
    }
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}

/** The Redis server's CPU time so far (ms), all its threads. */
export async function redisCpuMs(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const sec = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (sec('used_cpu_sys') + sec('used_cpu_user')) * 1000;
}
