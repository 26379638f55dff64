// CLI start and service ready time, compiled (dist/) against the sources through tsx, on a copy of
// the checkout built as `npm ci` builds it (testing/compiled-checkout.ts). Medians of 5, the two
// modes interleaved so that the machine's noise falls on both alike.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoalClient } from '../cli/goal-client.ts';
import { loadConfig } from '../shared/runtime/config.ts';
import { createRedis } from '../shared/runtime/redis.ts';
import { type Checkout, sourceCheckout } from '../testing/compiled-checkout.ts';
import { testEnv } from '../testing/fleet.ts';
import { nextFreePort } from '../testing/ports.ts';

const RUNS = 5;
const MODES = ['compiled', 'sources'] as const;
type Mode = (typeof MODES)[number];
// Written by the child at exit: its own CPU time and peak RSS (Node has no rusage of children).
const RUSAGE_HOOK =
  "data:text/javascript,import{writeFileSync}from'node:fs';process.on('exit',()=>{const u=process.resourceUsage();" +
  'writeFileSync(process.env.DEEPQ_BENCH_RUSAGE,JSON.stringify([u.userCPUTime+u.systemCPUTime,u.maxRSS]))})';

interface Sample {
  wallMs: number;
  cpuMs: number;
  rssMiB: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const modeEnv = (mode: Mode): NodeJS.ProcessEnv => (mode === 'sources' ? { DEEPQ_FROM_SOURCE: '1' } : {});

/** One run of a command to its exit: wall time from spawn, and its CPU time and peak RSS. */
async function timed(bin: string, args: string[], env: NodeJS.ProcessEnv, dir: string): Promise<Sample> {
  const file = join(dir, 'rusage.json');
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['--import', RUSAGE_HOOK, bin, ...args], {
    env: { ...env, DEEPQ_BENCH_RUSAGE: file },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  const wallMs = performance.now() - t0;
  if (code !== 0) throw new Error(`deepq ${args.join(' ')} exited ${code}: ${err}`);
  const [cpuUs, rssKiB] = JSON.parse(readFileSync(file, 'utf8')) as [number, number];
  return { wallMs, cpuMs: cpuUs / 1000, rssMiB: rssKiB / 1024 };
}

/** From spawn to /readyz answering 200, then a SIGTERM drain. */
async function readyMs(bin: string, env: NodeJS.ProcessEnv, port: number): Promise<number> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [bin, 'planner'], {
    env: { ...env, METRICS_PORT: String(port), LOG_LEVEL: 'error' },
    stdio: 'ignore',
  });
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return performance.now() - t0;
      if (proc.exitCode !== null) throw new Error(`deepq planner exited ${proc.exitCode}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    proc.kill('SIGTERM');
    if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
  }
}

function summary(samples: Sample[]) {
  return {
    wall_s: Math.round(median(samples.map((s) => s.wallMs))) / 1000,
    cpu_s: Math.round(median(samples.map((s) => s.cpuMs))) / 1000,
    rss_mib: Math.round(median(samples.map((s) => s.rssMiB))),
  };
}

async function measure(co: Checkout, env: NodeJS.ProcessEnv, goalId: string, dir: string) {
  const help: Record<Mode, Sample[]> = { compiled: [], sources: [] };
  const status: Record<Mode, Sample[]> = { compiled: [], sources: [] };
  const ready: Record<Mode, number[]> = { compiled: [], sources: [] };
  // One unmeasured round first: tsx's transform cache and the OS file cache warm, as for a user's
  // second command.
  for (let round = -1; round < RUNS; round++) {
    for (const mode of MODES) {
      const e = { ...env, ...modeEnv(mode) };
      const h = await timed(co.bin, ['--help'], e, dir);
      const s = await timed(co.bin, ['status', goalId], e, dir);
      const r = await readyMs(co.bin, e, nextFreePort());
      if (round < 0) continue;
      help[mode].push(h);
      status[mode].push(s);
      ready[mode].push(r);
    }
  }
  const both = <T>(f: (m: Mode) => T) => ({ compiled: f('compiled'), sources: f('sources') });
  return {
    cli_help: { ...both((m) => summary(help[m])), target_wall_s: 0.3 },
    cli_status: { ...both((m) => summary(status[m])), target_wall_s: 0.5 },
    service_ready: {
      ...both((m) => ({ wall_s: Math.round(median(ready[m])) / 1000 })),
      target_compiled_s: 0.8,
    },
  };
}

export async function benchStartup(redisUrl: string) {
  const dir = mkdtempSync(join(tmpdir(), 'deepq-bench-startup-'));
  const co = sourceCheckout();
  try {
    const t0 = performance.now();
    co.build();
    const buildSeconds = Math.round(performance.now() - t0) / 1000;
    const env = { ...testEnv(redisUrl), LOG_LEVEL: 'error' };
    const client = new GoalClient(loadConfig(env), createRedis(redisUrl, 'deepq:bench'));
    const goalId = await client.enqueue({ goal: 'A goal for deepq status' });
    await client.close();
    return {
      ...(await measure(co, env, goalId, dir)),
      build_seconds: buildSeconds,
      note:
        `median of ${RUNS}, compiled and sources interleaved after one warm-up round; a copy of the checkout ` +
        'built by scripts/build.mjs; sources = DEEPQ_FROM_SOURCE=1 (tsx, its transform cache warm); status of a ' +
        'queued goal on a private Redis; service ready = `deepq planner` from spawn to /readyz 200',
    };
  } finally {
    co.remove();
    rmSync(dir, { recursive: true, force: true });
  }
}
