// `deepq goals | head -1`: a reader that closes the pipe early ends the command quietly, with
// no stack trace on stderr (Node reports EPIPE as an error on stdout).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { BIN } from '../../cli/supervisor.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();

test('a command whose stdout is closed early exits quietly: nothing on stderr', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  for (let i = 0; i < 3; i++) assert.equal((await runCli(['enqueue', `goal ${i}`], env)).code, 0);
  for (const args of [['goals'], ['goals', '--json']]) {
    const proc = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    // The reader goes before the command writes anything (it connects to Redis first).
    proc.stdout.destroy();
    let stderr = '';
    proc.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    assert.equal(stderr, '', `deepq ${args.join(' ')} wrote to stderr`);
    assert.equal(code, 0, `deepq ${args.join(' ')}`);
  }
});
