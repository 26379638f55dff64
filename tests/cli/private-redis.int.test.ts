// The private redis-server of tests, the demo and the bench is never someone else's: a port
// that answers is checked to be held by the server just started, and a port taken between the
// free-port check and the bind costs a retry on another port, never a shared server.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { awaitOwnListener, ownsListener, startPrivateRedis } from '../../cli/private-redis.ts';

test('a private redis-server holds its own port, and a port held by another process is told apart', async () => {
  const redis = await startPrivateRedis();
  try {
    assert.equal(ownsListener(redis.proc.pid!, redis.port), true);
    assert.equal(ownsListener(process.pid, redis.port), false);
    await redis.restart(50);
    assert.equal(ownsListener(redis.proc.pid!, redis.port), true, 'a restart keeps the port');
  } finally {
    await redis.stop();
  }
});

test('a redis-server started on a port something else listens on is never taken for ready', async () => {
  const other = createServer((sock) => sock.end());
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  const port = (other.address() as { port: number }).port;
  try {
    // The port answers (this process listens there), so "something answers" would say ready.
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', ''], {
      stdio: 'ignore',
    });
    assert.equal(await awaitOwnListener(proc, port, 5000), 'exited');
  } finally {
    await new Promise((r) => other.close(r));
  }
});
