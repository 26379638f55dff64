// `deepq up` starts every service as its own child process on its own metrics port, runs
// goals, and a terminal Ctrl-C (SIGINT to the foreground group) stops them all cleanly. A
// supervisor killed outright (SIGKILL) leaves no child behind: each drains and exits.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { freePort, freePortRange } from '../../cli/private-redis.ts';
import { BIN } from '../../cli/supervisor.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const NAMES = ['planner', 'reflector', 'worker-research-specialist', 'worker-code-writer', 'worker-critic'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts `deepq up` in its own process group (the test plays the terminal); `out()` is its
 *  output and its children's (they inherit its stdout and stderr). `closed` (its exit code) settles
 *  once every writer of that output has exited and the test has read all of it: a process's exit
 *  can be seen before its last lines are read from the pipe. */
function startUp(
  env: NodeJS.ProcessEnv,
  base: number,
): { up: ChildProcess; out: () => string; closed: Promise<number | null> } {
  const up = spawn(process.execPath, [BIN, 'up', '--metrics-port-base', String(base)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  up.stdout!.on('data', (d) => (out += d));
  up.stderr!.on('data', (d) => (out += d));
  const closed = new Promise<number | null>((r) => up.on('close', (code) => r(code)));
  return { up, out: () => out, closed };
}

/** The pids of a process's live children (Linux /proc; a zombie counts as gone). */
function childPids(ppid: number): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = procStat(Number(d));
    if (st && st.ppid === ppid && st.state !== 'Z') pids.push(Number(d));
  }
  return pids;
}
function procStat(pid: number): { state: string; ppid: number } | undefined {
  try {
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: state!, ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // Reparented children are reaped by init; until then a zombie has exited all the same.
  return procStat(pid)?.state !== 'Z';
}

test('deepq up prints a port per child, serves a goal, and stops on Ctrl-C with exit 0', async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const env = testEnv(redis.url);
  const { up, out, closed: exited } = startUp(env, base);
  const client = new GoalClient(loadConfig(env));
  try {
    for (const [i, name] of NAMES.entries()) {
      for (let t = 0; ; t++) {
        if (new RegExp(`${name}\\s+metrics http://127\\.0\\.0\\.1:${base + i}/metrics`).test(out())) break;
        if (t > 200) throw new Error(`no port line for ${name}:\n${out()}`);
        await sleep(50);
      }
    }
    const goalId = await client.enqueue({ goal: 'Up and running' });
    assert.equal((await client.waitFor(goalId, { timeoutMs: 60_000 })).status, 'done');
    // Each child really serves its own port.
    for (let i = 0; i < NAMES.length; i++)
      assert.equal((await fetch(`http://127.0.0.1:${base + i}/healthz`)).status, 200);
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 0, out());
    for (const name of NAMES) assert.match(out(), new RegExp(`${name} exited cleanly`));
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
    await client.close();
  }
});

const linuxOnly = { skip: process.platform !== 'linux' && 'reads /proc' };

test(
  'deepq up and its children sent SIGTERM at once (a systemd stop) drain their running jobs',
  linuxOnly,
  async () => {
    await redis.ready;
    const base = await freePortRange(NAMES.length);
    const env = testEnv(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '3000' });
    const { up, out, closed: exited } = startUp(env, base);
    const client = new GoalClient(loadConfig(env));
    try {
      const goalId = await client.enqueue({ goal: 'Stopped mid-plan' });
      // The planner's job is in its 3 s model call.
      for (let t = 0; (await client.get(goalId)).status !== 'planning'; t++) {
        if (t > 600) throw new Error(`never planning:\n${out()}`);
        await sleep(50);
      }
      const pids = childPids(up.pid!);
      assert.equal(pids.length, NAMES.length);
      for (const pid of [up.pid!, ...pids]) process.kill(pid, 'SIGTERM');
      assert.equal(await exited, 0, out());
      assert.doesNotMatch(out(), /second signal/);
      for (const name of NAMES) assert.match(out(), new RegExp(`${name} exited cleanly`));
      // The plan job finished in the drain: the goal went on to its subtasks, none was cut short.
      const g = await client.get(goalId);
      assert.ok(g.step >= 1 && g.plan, `the plan job was cut short: ${g.status} at step ${g.step}`);
    } finally {
      if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
      await client.close();
    }
  },
);
test('Ctrl-C twice: deepq up says what the first waits for, the second stops the draining children now', async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const env = testEnv(redis.url, { DEEPQ_SCRIPTED_LATENCY_MS: '20000' });
  const { up, out, closed: exited } = startUp(env, base);
  const client = new GoalClient(loadConfig(env));
  try {
    const goalId = await client.enqueue({ goal: 'Stopped twice' });
    // The planner's job is in its 20 s model call: a drain would wait for it.
    for (let t = 0; (await client.get(goalId)).status !== 'planning'; t++) {
      if (t > 600) throw new Error(`never planning:\n${out()}`);
      await sleep(50);
    }
    const started = Date.now();
    process.kill(-up.pid!, 'SIGINT');
    for (let t = 0; !/Ctrl-C again stops now/.test(out()); t++) {
      if (t > 200) throw new Error(`no stopping line:\n${out()}`);
      await sleep(50);
    }
    assert.match(out(), /each finishes its running jobs first \(up to 25 s\)/);
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 1, out());
    assert.ok(Date.now() - started < 10_000, `the second Ctrl-C waited for the drain: ${Date.now() - started} ms`);
    assert.match(out(), /stopping now: planner\b.*run again once found stalled \(within 45 s\)/);
    assert.match(out(), /planner exited with a signal/);
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
    await client.close();
  }
});

test('children of a SIGKILLed deepq up drain and exit by themselves', linuxOnly, async (t) => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const env = testEnv(redis.url);
  const { up, out, closed } = startUp(env, base);
  let pids: number[] = [];
  try {
    // Every child serving, and past its start line (its shutdown hooks are installed after it).
    for (let i = 0; ; i++) {
      const ready = await Promise.all(
        NAMES.map((_n, k) =>
          fetch(`http://127.0.0.1:${base + k}/readyz`).then(
            (r) => r.ok,
            () => false,
          ),
        ),
      );
      const startLines = out().match(/"msg":"[^"]* started"/g) ?? [];
      if (ready.every(Boolean) && startLines.length >= NAMES.length) break;
      if (i > 1200) throw new Error(`children did not all start:\n${out()}`);
      await sleep(50);
    }
    pids = childPids(up.pid!);
    assert.equal(pids.length, NAMES.length, `one process per service: ${pids.join(', ')}`);

    process.kill(up.pid!, 'SIGKILL');
    const killedAt = Date.now();
    while (pids.some(alive) && Date.now() - killedAt < 20_000) await sleep(50);
    const left = pids.filter(alive);
    assert.deepEqual(left, [], `children still running ${Date.now() - killedAt} ms after the supervisor died`);
    const took = Date.now() - killedAt;
    assert.ok(took < 10_000, `children took ${took} ms to exit`);
    t.diagnostic(`all ${pids.length} children exited ${took} ms after the supervisor's SIGKILL`);
    await closed;
    // They drained (the graceful stop), rather than being cut off.
    assert.equal(out().match(/supervisor gone/g)?.length, NAMES.length, out());
    assert.equal(out().match(/"msg":"stopped"/g)?.length, NAMES.length, out());
  } finally {
    if (up.exitCode === null && up.signalCode === null) process.kill(-up.pid!, 'SIGKILL');
    for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
  }
});

test('children still starting when deepq up is SIGKILLed exit too', linuxOnly, async (t) => {
  await redis.ready;
  // Port 0: each child binds whatever port is free; this test never scrapes them.
  const { up, out, closed } = startUp(testEnv(redis.url), 0);
  let pids: number[] = [];
  try {
    // Kill the supervisor as soon as its children exist, before any has started its service.
    for (let i = 0; pids.length < NAMES.length; i++) {
      if (i > 1000) throw new Error(`children were not spawned:\n${out()}`);
      await sleep(10);
      pids = childPids(up.pid!);
    }
    assert.equal(out().match(/"msg":"[^"]* started"/g), null, 'no child had started yet');
    process.kill(up.pid!, 'SIGKILL');
    const killedAt = Date.now();
    while (pids.some(alive) && Date.now() - killedAt < 30_000) await sleep(50);
    assert.deepEqual(pids.filter(alive), [], `children still running:\n${out()}`);
    t.diagnostic(`all ${pids.length} children exited ${Date.now() - killedAt} ms after the supervisor's SIGKILL`);
    await closed;
    assert.equal(out().match(/supervisor gone/g)?.length, NAMES.length, out());
  } finally {
    if (up.exitCode === null && up.signalCode === null) process.kill(-up.pid!, 'SIGKILL');
    for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
  }
});

/** A process's arguments; none once it is gone. */
function argsOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** Kills (SIGKILL) each child of `ppid` whose arguments include one of `names` as it appears, until `done`. */
async function keepKilling(ppid: number, names: string[], done: () => boolean): Promise<number> {
  const killed = new Set<number>();
  for (let t = 0; !done(); t++) {
    if (t > 1500) throw new Error('the supervisor never gave up');
    for (const pid of childPids(ppid)) {
      if (killed.has(pid) || !names.some((n) => argsOf(pid).includes(n))) continue;
      try {
        process.kill(pid, 'SIGKILL');
        killed.add(pid);
      } catch {
        /* gone meanwhile */
      }
    }
    await sleep(20);
  }
  return killed.size;
}

test('a child that keeps dying at start is not restarted for ever: deepq up says why, stops the rest, exits 1', {
  ...linuxOnly,
  timeout: 90_000,
}, async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const { up, out, closed: exited } = startUp(testEnv(redis.url), base);
  try {
    const given = /deepq up: planner is not restarted: it exited 5 times in a row within 30 s of starting/;
    const kills = await keepKilling(up.pid!, ['planner'], () => given.test(out()));
    assert.equal(kills, 5);
    assert.equal(await exited, 1, out());
    for (const name of NAMES.slice(1)) assert.match(out(), new RegExp(`${name} exited cleanly`));
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
  }
});

test('every child dying at once: deepq up still gives up with exit 1, not a silent exit 0', {
  ...linuxOnly,
  timeout: 90_000,
}, async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  // Between the restarts no child runs (the supervisor once ended there, its restart timers
  // unref'd, exit 0).
  const { up, out, closed: exited } = startUp(testEnv(redis.url), base);
  try {
    const given = /deepq up: \S+ is not restarted: it exited 5 times in a row within 30 s of starting/;
    await keepKilling(up.pid!, ['planner', 'reflector', 'worker'], () => given.test(out()) || up.exitCode !== null);
    assert.equal(await exited, 1, out());
    assert.match(out(), given);
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
  }
});

test('a metrics port already taken: deepq up names it and how to pick others, restarts nothing, exits 78', {
  timeout: 90_000,
}, async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const holder = createServer().listen(base, '127.0.0.1');
  await once(holder, 'listening');
  const { up, out, closed: exited } = startUp(testEnv(redis.url), base);
  try {
    assert.equal(await exited, 78, out());
    const taken = `metrics port ${base} on 127.0.0.1 is in use (another deepq up, or a service, on this machine?)`;
    assert.ok(out().includes(`deepq: error: ${taken}: pick another with METRICS_PORT, or with --metrics-port-base`));
    assert.match(out(), /deepq up: planner is not restarted: it refused its configuration/);
    assert.doesNotMatch(out(), /restarting/);
    for (const name of NAMES.slice(1)) assert.match(out(), new RegExp(`${name} exited cleanly`));
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
    holder.close();
  }
});

test('a Redis that does not answer: deepq up says so in plain words, and again once it answers', {
  timeout: 90_000,
}, async () => {
  const base = await freePortRange(NAMES.length);
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const { up, out, closed: exited } = startUp(testEnv(url), base);
  let server: ChildProcess | undefined;
  try {
    const away = `deepq up: cannot reach Redis at ${url} (connect ECONNREFUSED 127.0.0.1:${port}): the services wait`;
    for (let t = 0; !out().includes(away); t++) {
      if (t > 300) throw new Error(`no plain line about Redis:\n${out()}`);
      await sleep(50);
    }
    server = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let t = 0; !out().includes(`deepq up: Redis at ${url} answers now`); t++) {
      if (t > 400) throw new Error(`no word once Redis answered:\n${out()}`);
      await sleep(50);
    }
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 0, out());
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
    server?.kill('SIGKILL');
  }
});

test('METRICS_PORT is the first port of deepq up when --metrics-port-base is not given', async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const up = spawn(process.execPath, [BIN, 'up'], {
    env: { ...testEnv(redis.url), METRICS_PORT: String(base) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  up.stdout!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => up.on('close', (code) => r(code)));
  try {
    for (let t = 0; !out.includes('worker-critic'); t++) {
      if (t > 200) throw new Error(`no port lines:\n${out}`);
      await sleep(50);
    }
    assert.match(out, new RegExp(`planner\\s+metrics http://127\\.0\\.0\\.1:${base}/metrics`));
    assert.match(out, new RegExp(`worker-critic\\s+metrics http://127\\.0\\.0\\.1:${base + 4}/metrics`));
    // Each child serves the port printed for it.
    for (let i = 0; i < NAMES.length; i++) {
      for (let t = 0; ; t++) {
        const ok = await fetch(`http://127.0.0.1:${base + i}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        if (t > 400) throw new Error(`port ${base + i} never answered:\n${out}`);
        await sleep(50);
      }
    }
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 0, out);
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
  }
});

test('Ctrl-C as soon as the ports are printed stops every child, exit 0', linuxOnly, async () => {
  await redis.ready;
  const base = await freePortRange(NAMES.length);
  const { up, out, closed: exited } = startUp(testEnv(redis.url), base);
  try {
    for (let t = 0; !out().includes('worker-critic'); t++) {
      if (t > 400) throw new Error(`no port lines:\n${out()}`);
      await sleep(5);
    }
    const children = childPids(up.pid!);
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 0, out());
    assert.match(out(), /stopping all services/);
    for (const pid of children) assert.ok(!alive(pid), `child ${pid} outlived deepq up`);
  } finally {
    if (up.exitCode === null && up.signalCode === null) process.kill(-up.pid!, 'SIGKILL');
  }
});

test('a --metrics-port-base whose children would need ports past 65535 is refused up front', async () => {
  await redis.ready;
  const { out, closed } = startUp(testEnv(redis.url), 65534);
  const code = await closed;
  assert.equal(code, 1);
  assert.match(out(), /deepq: error: --metrics-port-base 65534: its children need ports up to 65538/);
  assert.doesNotMatch(out(), /planner\s+metrics/);
});
