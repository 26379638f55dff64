// Test processes' metrics ports skip whatever already listens on the machine (RabbitMQ's 25672
// broke a run once: EADDRINUSE at a service's start).
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { listeningPorts, nextFreePort } from '../../testing/ports.ts';

test('a port something listens on is seen as busy, and is never handed out while it is', async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    assert.ok(listeningPorts().has(port), `port ${port} not seen as listening`);
    for (let i = 0; i < 50; i++) {
      const p = nextFreePort();
      assert.ok(p >= 10000 && p < 30000, `${p} out of range`);
      assert.ok(!listeningPorts().has(p), `${p} is busy`);
    }
  } finally {
    await new Promise((r) => server.close(r));
  }
  assert.ok(!listeningPorts().has(port), 'a closed port still seen as listening');
});
