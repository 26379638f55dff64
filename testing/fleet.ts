// Real OS processes for the services, as users run them: `node bin/deepq.mjs <command>`.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { GoalClient } from '../cli/goal-client.ts';
import { BIN } from '../cli/supervisor.ts';
import { type Config, loadConfig } from '../shared/runtime/config.ts';
import { createRedis } from '../shared/runtime/redis.ts';
import { nextFreePort } from './ports.ts';
import { tempDir } from './temp-dir.ts';

export interface ServiceProc {
  name: string;
  args: string[];
  proc: ChildProcess;
  /** Its /metrics, /healthz and /readyz port. */
  port: number;
  output: () => string;
}

/** A blob dir of this test process's own, removed when it exits (a suite run makes hundreds). */
const newBlobDir = (): string => tempDir('deepq-blobs-');

export function testEnv(redisUrl: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  // Never fall back to the shared Redis on 6379.
  if (!redisUrl) throw new Error('testEnv: no private Redis URL (await redis.ready first)');
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    REDIS_URL: redisUrl,
    DEEPQ_PREFIX: `t${Math.random().toString(36).slice(2, 8)}`,
    DEEPQ_BLOB_DIR: extra.DEEPQ_BLOB_DIR ?? newBlobDir(),
    DEEPQ_MODEL_PROVIDER: 'scripted',
    LOG_LEVEL: 'info',
    METRICS_PORT: '0',
    ...extra,
  };
}

/** Every process a test file started and has not stopped: stopped before its Redis goes. */
const running = new Set<ServiceProc>();
const openClients = new Set<GoalClient>();

/** Stops whatever this file's tests left running (useRedis calls it before stopping Redis,
 *  so services drain against a live Redis instead of waiting out their timeouts). */
export async function stopEverything(): Promise<void> {
  await Promise.all([...openClients].map((c) => c.close().catch(() => {})));
  openClients.clear();
  await Promise.all([...running].map((p) => stopProcess(p)));
}

/** Starts `deepq <args>` as a child process on its own metrics port (a fixed one, so a
 *  restarted process keeps it). */
export function startProcess(name: string, args: string[], env: NodeJS.ProcessEnv, port = nextFreePort()): ServiceProc {
  const proc = spawn(process.execPath, [BIN, ...args], {
    env: { ...env, METRICS_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const svc: ServiceProc = { name, args, proc, port, output: () => out };
  running.add(svc);
  proc.once('exit', () => running.delete(svc));
  return svc;
}

/** Waits until the service's /readyz says ready (Redis reachable, worker running). */
export async function waitForStart(svc: ServiceProc, timeoutMs = 90_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${svc.port}/readyz`);
      if (res.status === 200) return svc.port;
    } catch {
      /* not listening yet */
    }
    if (svc.proc.exitCode !== null) throw new Error(`${svc.name} exited with ${svc.proc.exitCode}:\n${svc.output()}`);
    if (Date.now() > deadline) throw new Error(`${svc.name} did not start within ${timeoutMs} ms:\n${svc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Fleet {
  env: NodeJS.ProcessEnv;
  cfg: Config;
  procs: ServiceProc[];
  ports: Map<string, number>;
  client: GoalClient;
  start(name: string, args: string[]): Promise<ServiceProc>;
  stop(): Promise<void>;
}

/** Planner, reflector and one worker per default role, each its own process. */
export async function startFleet(
  redisUrl: string,
  extraEnv: NodeJS.ProcessEnv = {},
  opts: { roles?: string[]; replicas?: number; concurrency?: number; replicateAll?: boolean } = {},
): Promise<Fleet> {
  const env = testEnv(redisUrl, extraEnv);
  const cfg = loadConfig(env);
  const procs: ServiceProc[] = [];
  const ports = new Map<string, number>();
  const start = async (name: string, args: string[]) => {
    const p = startProcess(name, args, env);
    procs.push(p);
    ports.set(name, await waitForStart(p));
    return p;
  };
  const n = opts.replicas ?? 1;
  const conc = opts.concurrency ? ['--concurrency', String(opts.concurrency)] : [];
  const specs: [string, string[]][] = [];
  for (let i = 0; i < (opts.replicateAll ? n : 1); i++) {
    specs.push(
      [`planner${i ? `-${i}` : ''}`, ['planner', ...conc]],
      [`reflector${i ? `-${i}` : ''}`, ['reflector', ...conc]],
    );
  }
  for (const role of opts.roles ?? cfg.roles.map((r) => r.name)) {
    for (let i = 0; i < n; i++) specs.push([`worker-${role}${i ? `-${i}` : ''}`, ['worker', '--role', role, ...conc]]);
  }
  await Promise.all(specs.map(([n, a]) => start(n, a)));
  const client = new GoalClient(cfg, createRedis(redisUrl, 'deepq:test'));
  openClients.add(client);
  let stopped = false;
  return {
    env,
    cfg,
    procs,
    ports,
    client,
    start,
    async stop() {
      if (stopped) return;
      stopped = true;
      openClients.delete(client);
      await client.close();
      await Promise.all(procs.map((p) => stopProcess(p)));
    },
  };
}

export function stopProcess(
  p: ServiceProc,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 15_000,
): Promise<number | null> {
  return new Promise((resolve) => {
    if (p.proc.exitCode !== null || p.proc.signalCode !== null) return resolve(p.proc.exitCode);
    const t = setTimeout(() => p.proc.kill('SIGKILL'), timeoutMs);
    p.proc.once('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
    p.proc.kill(signal);
  });
}

/** Runs the CLI to completion and returns its exit code and output. */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
  cwd?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [BIN, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    let killed = false;
    const t = setTimeout(() => {
      killed = true;
      proc.kill('SIGKILL');
    }, timeoutMs);
    proc.on('exit', (code) => {
      clearTimeout(t);
      // A command that hangs is killed with nothing on stderr: say so, with what it did print.
      if (killed)
        stderr += `\n[deepq ${args[0]}: killed after ${timeoutMs} ms; its stdout: ${stdout.slice(-2000) || '(empty)'}]`;
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * What a failed assertion on a fleet should show: each process (running, or how it ended) with
 * its last warnings and errors, and every goal's status. A goal that never ends leaves a CLI
 * `--wait` silent; this says which service stopped or complained.
 */
export async function fleetReport(fleet: Fleet, lines = 8): Promise<string> {
  const out: string[] = [];
  for (const p of fleet.procs) {
    const { exitCode, signalCode } = p.proc;
    const state = exitCode === null && signalCode === null ? 'running' : `ended (${exitCode ?? signalCode})`;
    const complaints = p
      .output()
      .split('\n')
      .filter((l) => /"level":(40|50|60)\b/.test(l) || (l && !l.startsWith('{')));
    out.push(`${p.name}: ${state}`, ...complaints.slice(-lines).map((l) => `  ${l.slice(0, 400)}`));
  }
  const goals = await fleet.client.list().catch((err: Error) => `goals not readable: ${err.message}`);
  out.push(`goals: ${JSON.stringify(goals)}`);
  return out.join('\n');
}

/** Fails, with the fleet's report, unless the CLI run `r` exited with `code`. */
export async function assertCliExit(r: { code: number | null; stderr: string }, code: number, fleet: Fleet) {
  if (r.code !== code) assert.fail(`deepq exited ${r.code}, not ${code}\n${r.stderr}\n${await fleetReport(fleet)}`);
}

/** A metric's value summed over every process of the fleet (series matching all `labels`). */
export async function metricSum(fleet: Fleet, name: string, labels: Record<string, string> = {}): Promise<number> {
  let sum = 0;
  for (const port of fleet.ports.values()) {
    const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const line of body.split('\n')) {
      if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.split(' ').pop());
    }
  }
  return sum;
}
