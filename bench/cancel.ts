// Cancel latency across processes: from the start of a `deepq cancel <goalId>` process to the
// moment the model endpoint sees the last of that goal's running model calls aborted.
//
// Real processes throughout: the planner, the reflector and one worker per role run as services
// (the Anthropic provider, the real SDK), against the local Messages-API server in this process.
// Each goal is planned at once as 5 subtasks spread over the roles (two, two and one per worker
// process); every subtask's model call is held for the model latency (2 s). When all 5 are held,
// `deepq cancel` starts, run as a user runs it after `npm ci`: a compiled copy of this checkout
// (testing/compiled-checkout.ts). The server records when each connection closes unanswered.
// Goals run one at a time, so no cancel competes with another for the CPU.
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { type Checkout, sourceCheckout } from '../testing/compiled-checkout.ts';
import { type Fleet, startFleet } from '../testing/fleet.ts';
import {
  defaultAnswer,
  firstUserText,
  goalOf,
  type MessagesApiServer,
  type MessagesBody,
  plannerRoles,
  type RecordedRequest,
  roleOf,
  startMessagesApiServer,
  text,
} from '../testing/messages-api-server.ts';
import { until } from '../testing/until.ts';
import { loadAverage, median, pct, quick, sleep } from './common.ts';

const GOALS = quick ? 10 : 50;
const WARM_UP = 2;
const SUBTASKS = 5;
const MODEL_LATENCY_MS = 2000;
const TARGET_P99_MS = 1000;

/** Five subtasks over the planner's roles, each instruction carrying the goal's tag. */
function fivePlan(body: MessagesBody) {
  const roles = plannerRoles(body);
  const goal = goalOf(body);
  return {
    subtasks: Array.from({ length: SUBTASKS }, (_, i) => ({
      role: roles[i % roles.length]!,
      instruction: `Part ${i + 1} of: ${goal}`,
      expected_artifact: `part-${i + 1}.md`,
      read_files: [],
    })),
  };
}

/** Plans answered at once; every subagent call held for the model latency, then answered. */
async function handler(body: MessagesBody) {
  const role = roleOf(body);
  if (role === 'planner') return text(JSON.stringify(fivePlan(body)));
  if (role !== 'reflector') await sleep(MODEL_LATENCY_MS);
  return text(defaultAnswer(body));
}

const tagOf = (k: number) => `[cancel-bench ${String(k).padStart(3, '0')}]`;

interface Sample {
  /** Start of `deepq cancel` → the last of the goal's 5 calls closed at the endpoint (Infinity: one was answered). */
  latencyMs: number;
  /** Start of `deepq cancel` → its publish on the cancel channel, as a subscriber here saw it. */
  publishMs: number;
  /** The first and the last abort, from the start of `deepq cancel`. */
  firstAbortMs: number;
  cliExitMs: number;
  /** How long the 5 calls had been held when the cancel started (the oldest). */
  heldMs: number;
}

/** Spawns `deepq cancel <goalId>`; resolves with the time it exited 0. */
function runCancel(co: Checkout, env: NodeJS.ProcessEnv, goalId: string): Promise<number> {
  const proc = spawn(process.execPath, [co.bin, 'cancel', goalId], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const exit = new Promise<number>((resolve, reject) =>
    proc.once('exit', (code) =>
      code === 0 ? resolve(Date.now()) : reject(new Error(`deepq cancel ${goalId} exited ${code}: ${err}`)),
    ),
  );
  exit.catch(() => {}); // awaited later: a failure meanwhile must not count as unhandled
  return exit;
}

/** Calls the bench's goals are held in, the cancel channel as seen here, and the CLI to cancel with. */
interface Rig {
  server: MessagesApiServer;
  fleet: Fleet;
  co: Checkout;
  env: NodeJS.ProcessEnv;
  /** When this process's subscriber saw each goal's cancel message. */
  published: Map<string, number>;
}

/** Goal `k`: enqueued, its 5 calls held, then `deepq cancel` timed until every call has ended. */
async function cancelOneGoal(rig: Rig, k: number): Promise<Sample> {
  const { server, fleet, co, env, published } = rig;
  const tag = tagOf(k);
  const goalId = await fleet.client.enqueue({ goal: `Cancel bench goal ${tag}` });
  const mine = (r: RecordedRequest) =>
    r.body && roleOf(r.body) !== 'planner' && roleOf(r.body) !== 'reflector' && firstUserText(r.body).includes(tag);
  const calls = await until(
    () => {
      const held = server.requests.filter(mine);
      return held.length >= SUBTASKS && held;
    },
    30_000,
    `the 5 model calls of goal ${k}`,
    2,
  );
  const t0 = Date.now();
  const exited = runCancel(co, env, goalId);
  await until(
    () => calls.every((c) => c.abortedAt !== undefined || c.response !== undefined),
    30_000,
    `the 5 calls of goal ${k} to end`,
    2,
  );
  const cliExit = await exited;
  const aborts = calls.map((c) => (c.abortedAt === undefined ? Number.POSITIVE_INFINITY : c.abortedAt - t0));
  return {
    latencyMs: Math.max(...aborts),
    firstAbortMs: Math.min(...aborts),
    publishMs: (published.get(goalId) ?? Number.NaN) - t0,
    cliExitMs: cliExit - t0,
    heldMs: t0 - Math.min(...calls.map((c) => c.receivedAt)),
  };
}

export async function benchCancel(redisUrl: string) {
  const server = await startMessagesApiServer({ handler: (body) => handler(body) });
  const co = sourceCheckout();
  co.build();
  const fleet = await startFleet(redisUrl, server.env({ LOG_LEVEL: 'warn' }));
  const sub = new Redis(redisUrl);
  const published = new Map<string, number>();
  sub.on('message', (_channel, goalId: string) => published.set(goalId, Date.now()));
  await sub.subscribe(fleet.client.goals.keys.cancelChannel());
  const rig: Rig = { server, fleet, co, env: { ...fleet.env, LOG_LEVEL: 'error' }, published };
  const samples: Sample[] = [];
  const load = { start: loadAverage(), end: [] as number[] };
  try {
    for (let k = 0; k < WARM_UP + GOALS; k++) {
      const sample = await cancelOneGoal(rig, k);
      if (k < WARM_UP) continue;
      samples.push(sample);
      // Let the workers finish the cancelled jobs before the next goal starts.
      await sleep(150);
    }
    load.end = loadAverage();
  } finally {
    sub.disconnect();
    await fleet.stop();
    await server.close();
    co.remove();
  }
  return cancelReport(samples, load);
}

/** The measured goals' cancel latencies, and the parts of it: the CLI's publish, the aborts after it. */
function cancelReport(samples: Sample[], load: { start: number[]; end: number[] }) {
  const lat = samples.map((s) => s.latencyMs);
  const finite = (xs: number[]) => xs.filter(Number.isFinite);
  const p99 = pct(lat, 99);
  return {
    cancel_latency_ms: {
      p50: Math.round(pct(lat, 50)),
      p99: Number.isFinite(p99) ? Math.round(p99) : null,
      max: Number.isFinite(Math.max(...lat)) ? Math.round(Math.max(...lat)) : null,
      target_p99: TARGET_P99_MS,
      goals: samples.length,
      calls_not_aborted: samples.filter((s) => !Number.isFinite(s.latencyMs)).length,
    },
    parts_ms: {
      cli_start_to_publish_p50: Math.round(median(finite(samples.map((s) => s.publishMs)))),
      cli_start_to_publish_p99: Math.round(pct(finite(samples.map((s) => s.publishMs)), 99)),
      publish_to_last_abort_p50: Math.round(median(finite(samples.map((s) => s.latencyMs - s.publishMs)))),
      publish_to_last_abort_p99: Math.round(pct(finite(samples.map((s) => s.latencyMs - s.publishMs)), 99)),
      first_to_last_abort_p50: Math.round(median(finite(samples.map((s) => s.latencyMs - s.firstAbortMs)))),
      cli_exit_p50: Math.round(median(samples.map((s) => s.cliExitMs))),
      calls_held_before_cancel_p50: Math.round(median(samples.map((s) => s.heldMs))),
    },
    latencies_ms: lat.map((x) => (Number.isFinite(x) ? x : null)),
    load_average: load,
    note:
      `${samples.length} goals one at a time (after ${WARM_UP} unmeasured), ${SUBTASKS} subtasks each over ` +
      `3 worker processes, every model call held ${MODEL_LATENCY_MS} ms by the local Messages-API server ` +
      '(real SDK); from spawning `deepq cancel` (compiled, as after npm ci) once all 5 calls are held, to the ' +
      "server seeing the last of them closed unanswered; p99 of 50 is the largest; publish = this process's " +
      'subscriber receiving the cancel message',
  };
}
