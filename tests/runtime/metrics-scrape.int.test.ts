// The ops server of a real service process binds loopback unless METRICS_HOST says otherwise,
// and a burst of concurrent /metrics scrapes costs one round of queue counts, reused for 1 s.
// Counts are read from the private Redis's SLOWLOG (threshold 0: every command, with its
// arguments), so nothing in the process is instrumented.

import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { after, before, test } from 'node:test';
import { portAnswers } from '../../cli/private-redis.ts';
import { type ServiceProc, startProcess, stopProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let env: NodeJS.ProcessEnv;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const started: ServiceProc[] = [];

/** An address of this host that is not 127.0.0.1: a real interface's, else 127.0.0.2 (Linux). */
function otherAddress(): string | undefined {
  for (const addrs of Object.values(networkInterfaces()))
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return process.platform === 'linux' ? '127.0.0.2' : undefined;
}

async function waitForHealth(svc: ServiceProc, host: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`http://${host}:${svc.port}/readyz`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    if (svc.proc.exitCode !== null) throw new Error(`${svc.name} exited with ${svc.proc.exitCode}:\n${svc.output()}`);
    if (Date.now() > deadline) throw new Error(`${svc.name} did not start on ${host}:\n${svc.output()}`);
    await sleep(50);
  }
}

function start(name: string, args: string[], extra: NodeJS.ProcessEnv = {}): ServiceProc {
  const p = startProcess(name, args, { ...env, ...extra });
  started.push(p);
  return p;
}

/** The getCounts script calls (one per queue per refresh) the Redis slowlog holds, by queue key. */
async function countCalls(): Promise<string[]> {
  const entries = (await redis.client.slowlog('GET', -1)) as [number, number, number, string[]][];
  return entries
    .map((e) => e[3])
    .filter((args) => /^eval(sha)?$/i.test(args[0] ?? '') && args.includes('waiting-children'))
    .map((args) => args[3]!);
}

before(async () => {
  await redis.ready;
  env = testEnv(redis.url);
});
after(async () => {
  await Promise.all(started.map((p) => stopProcess(p)));
});

test('the ops server listens on 127.0.0.1 by default and on METRICS_HOST when set', async (t) => {
  const other = otherAddress();
  const loopback = start('reflector', ['reflector']);
  const everywhere = start('worker-critic', ['worker', '--role', 'critic'], { METRICS_HOST: '0.0.0.0' });
  await Promise.all([waitForStart(loopback), waitForStart(everywhere)]);
  if (!other) return t.skip('no address of this host other than 127.0.0.1');
  assert.equal(await portAnswers(loopback.port, other), false, `default: not reachable on ${other}`);
  assert.equal((await fetch(`http://${other}:${everywhere.port}/healthz`)).status, 200, 'METRICS_HOST=0.0.0.0');
  // The start line says where it listens (it follows readiness by a moment).
  for (let i = 0; i < 200 && !/reflector started/.test(loopback.output()); i++) await sleep(25);
  assert.match(loopback.output(), /"metricsHost":"127\.0\.0\.1"/);
  if (process.platform !== 'linux') return;
  // A specific address: reachable there, and not on 127.0.0.1.
  const specific = start('worker-code-writer', ['worker', '--role', 'code-writer'], { METRICS_HOST: '127.0.0.2' });
  await waitForHealth(specific, '127.0.0.2');
  assert.equal(await portAnswers(specific.port, '127.0.0.1'), false, 'METRICS_HOST=127.0.0.2: not on 127.0.0.1');
});

test('concurrent scrapes run one round of queue counts; a scrape within 1 s reuses it', async (t) => {
  // The reflector reports every queue's depth: the most expensive scrape there is.
  const reflector = started.find((p) => p.name === 'reflector') ?? start('reflector', ['reflector']);
  const port = await waitForStart(reflector);
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    return res.text();
  };
  const warm = await scrape();
  // Names and labels as before.
  assert.match(warm, /deepq_queue_jobs\{queue="plan",state="waiting",service="reflector"\} 0/);
  assert.match(warm, /deepq_queue_jobs\{queue="subagent-critic",state="waiting-children",service="reflector"\} 0/);
  await sleep(1200);
  await redis.client.config('SET', 'slowlog-max-len', '100000');
  await redis.client.config('SET', 'slowlog-log-slower-than', '0');
  try {
    await redis.client.slowlog('RESET');
    const N = 20;
    const burstStart = Date.now();
    await Promise.all(Array.from({ length: N }, scrape));
    const burstEnd = Date.now();
    const round = await countCalls();
    const queues = new Set(round);
    assert.ok(queues.size >= 6, `every reported queue counted: ${[...queues].join(', ')}`);
    // On a loaded machine the burst itself can outlast the 1 s TTL: a round per second it took, at most.
    const rounds = Math.max(1, Math.ceil((burstEnd - burstStart) / 1000));
    const what = `${N} concurrent scrapes in ${burstEnd - burstStart} ms: ${round.length} getCounts calls`;
    assert.ok(round.length <= rounds * queues.size && round.length % queues.size === 0, what);
    t.diagnostic(`${what} for ${queues.size} queues`);

    await scrape();
    if (Date.now() - burstEnd < 900) assert.equal((await countCalls()).length, round.length, 'within 1 s: cached');
    await sleep(1100);
    await scrape();
    assert.equal((await countCalls()).length, round.length + queues.size, 'past 1 s: one more round');
  } finally {
    await redis.client.config('SET', 'slowlog-log-slower-than', '10000');
  }
});
