// `npm run chaos -- [--goals 200] [--replicas 2] [--kill-every-ms 1000] [--latency-ms 150]
//   [--lock-ms 4000] [--stalled-ms 1000] [--spread-ms <ms>] [--timeout-ms 900000]
//   [--concurrency 8] [--seed <n>] [--out bench/results/chaos.json]`
//
// The large chaos run: a private redis-server, `replicas` processes per service, a random
// one SIGKILLed every interval and restarted, N goals on the scripted model. Prints a
// summary (goals, kills, restarts, lost, duplicates, re-executions, wall time), writes it as
// JSON, and exits 1 when a goal was lost, an effect duplicated, or a process died by itself.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { availableParallelism, cpus } from 'node:os';
import { hasRedisServer, startPrivateRedis } from '../cli/private-redis.ts';
import { formatReport, runChaos } from '../testing/chaos.ts';

function arg(name: string, fallback: number): number;
function arg(name: string, fallback: string): string;
function arg(name: string, fallback: number | string): number | string {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const raw = process.argv[i + 1];
  if (raw === undefined) throw new Error(`--${name} needs a value`);
  if (typeof fallback === 'string') return raw;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  return n;
}

async function main(): Promise<number> {
  if (!hasRedisServer()) throw new Error('redis-server is not on PATH: the chaos run starts its own private one');
  const goals = arg('goals', 200);
  const out = resolve(arg('out', 'bench/results/chaos.json'));
  const seedArg = arg('seed', -1);
  const opts = {
    goals,
    replicas: arg('replicas', 2),
    replicateAll: true,
    killEveryMs: arg('kill-every-ms', 1000),
    latencyMs: arg('latency-ms', 150),
    lockDurationMs: arg('lock-ms', 4000),
    stalledIntervalMs: arg('stalled-ms', 1000),
    // Enough time for the chaos to matter: goals arrive over ~goals/4 seconds by default.
    enqueueSpreadMs: arg('spread-ms', goals * 250),
    timeoutMs: arg('timeout-ms', 900_000),
    concurrency: arg('concurrency', 8),
    ...(seedArg >= 0 ? { seed: seedArg } : {}),
    log: (s: string) => process.stderr.write(`${s}\n`),
  };
  const redis = await startPrivateRedis();
  let report;
  try {
    report = await runChaos(redis.url, opts);
  } finally {
    await redis.stop();
  }
  const summary = formatReport(report);
  process.stdout.write(`\ndeepq chaos run\n${summary}\n`);
  if (report.problems.length) process.stdout.write(`problems (${report.problems.length}):\n${report.problems.slice(0, 50).map((p) => `  - ${p}`).join('\n')}\n`);
  if (report.failures.length) process.stdout.write(`jobs that failed for good (${report.failures.length}):\n${report.failures.slice(0, 20).map((p) => `  - ${p}`).join('\n')}\n`);
  for (const e of report.unexpectedExits) process.stdout.write(`unexpected exit: ${e.name} (${e.signal ?? e.code})\n${e.tail}\n`);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify({
    at: new Date().toISOString(),
    machine: { cpus: availableParallelism(), model: cpus()[0]?.model ?? 'unknown', node: process.version },
    ...report,
    unexpectedExits: report.unexpectedExits.map((e) => ({ name: e.name, code: e.code, signal: e.signal })),
    problems: report.problems.slice(0, 200),
    failures: report.failures.slice(0, 200),
  }, null, 2) + '\n');
  process.stdout.write(`written to ${out}\n`);
  const ok = report.lost === 0 && report.duplicates === 0 && report.unexpectedExits.length === 0 && report.done === report.goals;
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos: error: ${(err as Error).message}\n`);
    process.exit(2);
  },
);
