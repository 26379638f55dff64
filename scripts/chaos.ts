// `npm run chaos -- [--goals 200] [--replicas 2] [--kill-every-ms 1000] [--latency-ms 150]
//   [--lock-ms 4000] [--stalled-ms 1000] [--spread-ms <ms>] [--timeout-ms 900000]
//   [--concurrency 8] [--seed <n>] [--drop-every-ms 700] [--cut-every-ms 5000]
//   [--redis-restart-at-ms <ms>] [--no-faults] [--out bench/results/chaos.json]`
//
// The large chaos run: a private redis-server (AOF), `replicas` processes per service, a random
// one SIGKILLed every interval and restarted, N goals on the scripted model. By default the
// fleet reaches Redis through a fault proxy that loses replies to deepq's scripts, cuts every
// connection now and then, and Redis is restarted once mid-run. Prints a
// summary (goals, kills, restarts, lost, duplicates, re-executions, wall time), writes it as
// JSON, and exits 1 when a goal was lost, an effect duplicated, a process died by itself, or
// the verifier listed any other problem (testing/chaos.ts chaosFailures), saying which.
// Exits 2 when it could not run (bad arguments, no redis-server).

import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { hasRedisServer, startPrivateRedis } from '../cli/private-redis.ts';
import { type ChaosOptions, type ChaosReport, chaosFailures, formatReport, runChaos } from '../testing/chaos.ts';

const count = (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('Expected a non-negative number.');
  return n;
};

interface Args {
  goals: number;
  replicas: number;
  killEveryMs: number;
  latencyMs: number;
  lockMs: number;
  stalledMs: number;
  spreadMs?: number;
  timeoutMs: number;
  concurrency: number;
  seed?: number;
  faults: boolean;
  dropEveryMs: number;
  cutEveryMs: number;
  redisRestartAtMs?: number;
  out: string;
}

function parseArgs(argv: string[]): Args {
  const program = new Command()
    .name('npm run chaos --')
    .description('The large chaos run: SIGKILL random deepq processes while goals run; report lost or duplicate work.')
    .option('--goals <n>', 'goals to run', count, 200)
    .option('--replicas <n>', 'processes per service (planner, reflector, each role)', count, 2)
    .option('--kill-every-ms <ms>', 'SIGKILL a random process this often', count, 1000)
    .option('--latency-ms <ms>', "the scripted model's latency per call", count, 150)
    .option('--lock-ms <ms>', 'BullMQ lock duration', count, 4000)
    .option('--stalled-ms <ms>', 'BullMQ stalled-job check interval', count, 1000)
    .option('--spread-ms <ms>', 'enqueue the goals evenly over this time (default: goals × 250)', count)
    .option('--timeout-ms <ms>', 'give up waiting for the goals after this long', count, 900_000)
    .option('--concurrency <n>', 'jobs each process runs at once', count, 8)
    .option('--seed <n>', 'seed for the kill schedule and the goals (default: random)', count)
    .option('--drop-every-ms <ms>', "lose the reply to one of deepq's scripts about this often", count, 700)
    .option('--cut-every-ms <ms>', 'cut every connection to Redis about this often', count, 5000)
    .option(
      '--redis-restart-at-ms <ms>',
      'restart Redis once, this long into the run (default: half the spread)',
      count,
    )
    .option('--no-faults', 'no fault proxy: SIGKILLs only')
    .option('--out <file>', 'where to write the JSON report', 'bench/results/chaos.json')
    .configureOutput({ outputError: (str, write) => write(`chaos: ${str}`) })
    // Bad arguments exit 2, like any other reason the run could not start; --help exits 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
  return program.parse(argv).opts<Args>();
}

function chaosOptions(a: Args, restartRedis: (downMs: number) => Promise<void>): ChaosOptions {
  const spread = a.spreadMs ?? a.goals * 250;
  const faults = {
    dropEveryMs: a.dropEveryMs,
    cutEveryMs: a.cutEveryMs,
    restartAtMs: a.redisRestartAtMs ?? Math.round(spread / 2),
    restartDownMs: 2000,
  };
  return {
    ...(a.faults ? { faults, restartRedis } : {}),
    goals: a.goals,
    replicas: a.replicas,
    replicateAll: true,
    killEveryMs: a.killEveryMs,
    latencyMs: a.latencyMs,
    lockDurationMs: a.lockMs,
    stalledIntervalMs: a.stalledMs,
    // Enough time for the chaos to matter: goals arrive over ~goals/4 seconds by default.
    enqueueSpreadMs: spread,
    timeoutMs: a.timeoutMs,
    concurrency: a.concurrency,
    ...(a.seed !== undefined ? { seed: a.seed } : {}),
    log: (s: string) => process.stderr.write(`${s}\n`),
  };
}

function printReport(report: ChaosReport): void {
  const list = (items: string[], max: number) =>
    items
      .slice(0, max)
      .map((p) => `  - ${p}`)
      .join('\n');
  process.stdout.write(`\ndeepq chaos run\n${formatReport(report)}\n`);
  if (report.problems.length) {
    process.stdout.write(`problems (${report.problems.length}):\n${list(report.problems, 50)}\n`);
  }
  if (report.failures.length) {
    process.stdout.write(`jobs that failed for good (${report.failures.length}):\n${list(report.failures, 20)}\n`);
  }
  for (const e of report.unexpectedExits) {
    process.stdout.write(`unexpected exit: ${e.name} (${e.signal ?? e.code})\n${e.tail}\n`);
  }
}

function writeReport(out: string, report: ChaosReport): void {
  const machine = { cpus: availableParallelism(), model: cpus()[0]?.model ?? 'unknown', node: process.version };
  const json = {
    at: new Date().toISOString(),
    machine,
    ...report,
    // The exits' output tails and the long lists are in the printed report; the file stays small.
    unexpectedExits: report.unexpectedExits.map((e) => ({ name: e.name, code: e.code, signal: e.signal })),
    problems: report.problems.slice(0, 200),
    failures: report.failures.slice(0, 200),
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(json, null, 2)}\n`);
  process.stdout.write(`written to ${out}\n`);
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv);
  if (!hasRedisServer()) throw new Error('redis-server is not on PATH: the chaos run starts its own private one');
  const out = resolve(args.out);
  // AOF: a restart mid-run must lose nothing acknowledged.
  const redis = await startPrivateRedis({ appendonly: true });
  let report: ChaosReport;
  try {
    report = await runChaos(
      redis.url,
      chaosOptions(args, (downMs) => redis.restart(downMs)),
    );
  } finally {
    await redis.stop();
  }
  printReport(report);
  writeReport(out, report);
  const failed = chaosFailures(report);
  if (failed.length) process.stderr.write(`chaos: FAILED: ${failed.join('; ')}\n`);
  else process.stdout.write('chaos: passed\n');
  return failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos: error: ${(err as Error).message}\n`);
    process.exit(2);
  },
);
