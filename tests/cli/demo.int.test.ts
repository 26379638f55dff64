// `npm run demo` runs one goal end to end with every service as its own process, prints
// the plan, each subtask's outcome and the artifacts, and exits 0.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { test } from 'node:test';
import { BIN } from '../../cli/supervisor.ts';
import { runCli } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { until } from '../../testing/until.ts';

const redis = useRedis();

test('the demo ends with a done goal and prints its plan, outcomes and artifacts', async () => {
  await redis.ready;
  // No REDIS_URL: the Redis answering on the local port (DEEPQ_DEMO_REDIS_PORT) is the one used.
  const env = {
    PATH: process.env.PATH,
    DEEPQ_DEMO_REDIS_PORT: String(redis.server.port),
    DEEPQ_PREFIX: 'demo',
    DEEPQ_BLOB_DIR: tempDir('demo-'),
  };
  const r = await runCli(['demo'], env, 120_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /no ANTHROPIC_API_KEY: using the offline scripted model/);
  assert.match(r.stdout, /cycle 1 planned 2 subtask\(s\)/);
  assert.match(r.stdout, /cycle 1 \[0\] research-specialist finished research\.md/);
  assert.match(r.stdout, /cycle 2 \[0\] critic finished critique\.json/);
  assert.match(r.stdout, /status: done/);
  for (const name of ['research.md', 'solution.py', 'critique.json'])
    assert.match(r.stdout, new RegExp(`=== ${name.replace('.', '\\.')} \\[done`));
  assert.doesNotMatch(r.stdout, /started a private redis-server/);
  assert.ok((await redis.client.keys('demo:*')).length > 0, 'the goal is not in the Redis on that port');
  // The demo's services are gone: nothing is left consuming the queues.
  const workers = await redis.client.client('LIST');
  assert.doesNotMatch(String(workers), /name=deepq:(planner|reflector|worker)/);
});

test('with no Redis to use, the demo starts a private redis-server and removes it afterwards', async () => {
  const { freePort, portAnswers } = await import('../../cli/private-redis.ts');
  const nothing = await freePort();
  const env = {
    PATH: process.env.PATH,
    DEEPQ_DEMO_REDIS_PORT: String(nothing),
    DEEPQ_PREFIX: 'demo2',
    DEEPQ_BLOB_DIR: tempDir('demo-'),
  };
  const r = await runCli(['demo'], env, 120_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const port = Number(/started a private redis-server on port (\d+)/.exec(r.stdout)?.[1]);
  assert.ok(port > 0, r.stdout);
  assert.match(r.stdout, /status: done/);
  assert.equal(await portAnswers(port), false, 'the private redis-server is still running');
});

test('a DEEPQ_DEMO_REDIS_PORT that is no port is refused (exit 78) before any Redis starts', async () => {
  for (const bad of ['abc', '0', '65536', '63 79']) {
    const r = await runCli(['demo'], { PATH: process.env.PATH, DEEPQ_DEMO_REDIS_PORT: bad }, 30_000);
    assert.equal(r.code, 78, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`DEEPQ_DEMO_REDIS_PORT="${bad}": a port, 1-65535`));
    assert.doesNotMatch(r.stdout, /started a private redis-server/);
  }
});

test('with no Redis and no redis-server on PATH, the demo says how to get one and exits 1', async () => {
  const { freePort } = await import('../../cli/private-redis.ts');
  const env = { PATH: '/nonexistent', DEEPQ_DEMO_REDIS_PORT: String(await freePort()) };
  const r = await runCli(['demo'], env, 60_000);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /no Redis answers on 127\.0\.0\.1:\d+ and no redis-server is on PATH/);
  assert.match(r.stdout, /apt-get install -y redis-server/);
});

/** Pids of the live processes whose environment holds `DEEPQ_PREFIX=<prefix>` (Linux /proc). */
function processesWithPrefix(prefix: string): number[] {
  const marker = `\0DEEPQ_PREFIX=${prefix}\0`;
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return `\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}`.includes(marker);
      } catch {
        return false; // gone meanwhile, or a zombie
      }
    })
    .map(Number);
}

test('with an unreachable REDIS_URL the demo says so, exits 1 and starts no services', async () => {
  const { freePort } = await import('../../cli/private-redis.ts');
  const prefix = `demo3${process.pid}`;
  const env = { PATH: process.env.PATH, REDIS_URL: `redis://127.0.0.1:${await freePort()}`, DEEPQ_PREFIX: prefix };
  const r = await runCli(['demo'], env, 40_000);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /deepq: error: cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+/);
  // The wait is said while it lasts, not 10 s of silence.
  assert.match(
    r.stderr,
    /^deepq: waiting for Redis at redis:\/\/127\.0\.0\.1:\d+ \(.*ECONNREFUSED.*\); giving up after 10 s$/m,
  );
  assert.deepEqual(processesWithPrefix(prefix), [], 'processes of the demo are still running');
});

/** The live child processes of `parent` (zombies excluded), from /proc/<pid>/stat. */
function childrenOf(parent: number): number[] {
  const stat = (pid: string) => {
    try {
      // After the command's closing parenthesis: state, then ppid.
      const [state, ppid] = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ');
      return state !== 'Z' && Number(ppid) === parent;
    } catch {
      return false;
    }
  };
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d) && stat(d))
    .map(Number);
}

const alive = (pid: number) => {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
};

/** The demo in its own process group, which a signal to -pid reaches: what a terminal's Ctrl-C does. */
function spawnDemo(env: NodeJS.ProcessEnv) {
  const demo = spawn(process.execPath, [BIN, 'demo'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  demo.stdout.on('data', (d) => (output += d));
  demo.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => demo.once('exit', (code) => resolve(code)));
  return { demo, out: () => output, exited };
}

test("Ctrl-C on the demo stops its services, then its private Redis, and removes the Redis's directory", async () => {
  const { freePort } = await import('../../cli/private-redis.ts');
  const env = {
    PATH: process.env.PATH,
    DEEPQ_DEMO_REDIS_PORT: String(await freePort()),
    DEEPQ_PREFIX: 'demo4',
    DEEPQ_BLOB_DIR: tempDir('demo-'),
    DEEPQ_SCRIPTED_LATENCY_MS: '2000',
  };
  const { demo, out, exited } = spawnDemo(env);
  // A child may exit between the listing and this read (the demo's short-lived helpers).
  const comm = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
    } catch {
      return '';
    }
  };
  // The goal is running, with the five services and the private redis-server up.
  const children = await until(
    () => {
      const now = childrenOf(demo.pid!);
      const services = now.filter((pid) => comm(pid) === 'node');
      return /goal [0-9a-f]+:/.test(out()) && services.length === 5 && now;
    },
    60_000,
    'the demo running its goal',
  );
  const redisPid = children.find((pid) => comm(pid) === 'redis-server');
  assert.ok(redisPid, 'no private redis-server');
  // redis-server works in its --dir.
  const redisDir = readlinkSync(`/proc/${redisPid}/cwd`);
  assert.match(redisDir, /deepq-redis-/);
  process.kill(-demo.pid!, 'SIGINT');
  assert.equal(await exited, 130, out());
  const left = children.filter(alive).map((pid) => `${pid} ${comm(pid)}`);
  assert.deepEqual(left, [], `processes of the demo are still running:\n${out()}`);
  assert.equal(existsSync(redisDir), false, 'the private Redis directory is still there');
  assert.match(out(), /SIGINT: stopping the services/);
  assert.doesNotMatch(out(), /ECONNREFUSED/, 'a service outlived the private Redis');
  assert.doesNotMatch(out(), /deepq: error/);
});

test('Ctrl-C on a demo using a Redis that outlives it cancels its goal: no later service takes it up', async () => {
  await redis.ready;
  const prefix = 'demo5';
  const env = {
    PATH: process.env.PATH,
    REDIS_URL: redis.url,
    DEEPQ_PREFIX: prefix,
    DEEPQ_BLOB_DIR: tempDir('demo-'),
    DEEPQ_SCRIPTED_LATENCY_MS: '2000',
  };
  const { demo, out, exited } = spawnDemo(env);
  // The goal is under way: its plan is dispatched, its subtasks' model calls in flight.
  await until(() => /cycle 1 planned/.test(out()), 60_000, 'the demo planning its goal');
  const goalId = /goal ([0-9a-f]+):/.exec(out())![1]!;
  process.kill(-demo.pid!, 'SIGINT');
  assert.equal(await exited, 130, out());
  assert.match(out(), new RegExp(`goal ${goalId} cancelled`));
  // The cancel ran to its end (the demo's stop closed its connection under it once).
  assert.doesNotMatch(out(), /was not cancelled/);
  const waiting = await redis.client.keys(`${prefix}:*:wait`);
  const left = await Promise.all(waiting.map((k) => redis.client.llen(k)));
  assert.deepEqual(
    left.filter((n) => n > 0),
    [],
    `jobs left waiting in ${waiting.join(', ')}`,
  );
  const g = await redis.client.hgetall(`${prefix}:goal:${goalId}`);
  assert.equal(g.status, 'cancelled', out());
  assert.equal(g.reason, 'cancelled by user');
});
