// `deepq up` starts every service as its own child process on its own metrics port, runs
// goals, and a terminal Ctrl-C (SIGINT to the foreground group) stops them all cleanly.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { freePort } from '../../cli/private-redis.ts';
import { BIN } from '../../cli/supervisor.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('deepq up prints a port per child, serves a goal, and stops on Ctrl-C with exit 0', async () => {
  await redis.ready;
  const base = await freePort();
  const env = testEnv(redis.url);
  // detached: the test plays the terminal, sending SIGINT to the whole process group.
  const up = spawn(process.execPath, [BIN, 'up', '--metrics-port-base', String(base)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  up.stdout.on('data', (d) => (out += d));
  up.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => up.on('exit', (code) => r(code)));
  const client = new GoalClient(loadConfig(env));
  try {
    const names = ['planner', 'reflector', 'worker-research-specialist', 'worker-code-writer', 'worker-critic'];
    for (const [i, name] of names.entries()) {
      for (let t = 0; ; t++) {
        if (new RegExp(`${name}\\s+metrics http://127\\.0\\.0\\.1:${base + i}/metrics`).test(out)) break;
        if (t > 200) throw new Error(`no port line for ${name}:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const goalId = await client.enqueue({ goal: 'Up and running' });
    assert.equal((await client.waitFor(goalId, { timeoutMs: 60_000 })).status, 'done');
    // Each child really serves its own port.
    for (let i = 0; i < names.length; i++)
      assert.equal((await fetch(`http://127.0.0.1:${base + i}/healthz`)).status, 200);
    process.kill(-up.pid!, 'SIGINT');
    assert.equal(await exited, 0, out);
    for (const name of names) assert.match(out, new RegExp(`${name} exited cleanly`));
  } finally {
    if (up.exitCode === null) process.kill(-up.pid!, 'SIGKILL');
    await client.close();
  }
});
