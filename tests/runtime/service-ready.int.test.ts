// /readyz says ready only once a service's start is complete: the reflector writes its
// maintenance schedules in its start, and a probe answered before that let a rollout move on
// (or a test look for the schedules) too early. Real Redis and BullMQ.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startService } from '../../shared/runtime/service.ts';
import { nextFreePort } from '../../testing/ports.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

test('/readyz answers 503 while the start is still under way, 200 once it is done', { timeout: 30_000 }, async () => {
  const port = nextFreePort();
  Object.assign(t.rt.cfg, { metricsPort: port });
  const probe = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
    return res && { status: res.status, body: (await res.json()) as { checks: Record<string, boolean> } };
  };
  let finishStart!: () => void;
  const starting = startService({
    rt: t.rt,
    name: 'worker',
    queueName: 'ready-test',
    role: 'tester',
    concurrency: 1,
    handler: async () => ({ ok: true }),
    onStart: () => new Promise<void>((r) => (finishStart = r)),
  });
  try {
    // The workers run and Redis answers; only the start's last step is still waiting.
    await until(async () => finishStart !== undefined && (await probe())?.body.checks.redis === true, 10_000);
    const early = await probe();
    assert.equal(early?.status, 503);
    assert.deepEqual(early?.body.checks, { redis: true, worker: false });
    finishStart();
    await starting;
    const ready = await probe();
    assert.equal(ready?.status, 200);
    assert.deepEqual(ready?.body.checks, { redis: true, worker: true });
  } finally {
    finishStart?.();
    await (await starting).stop();
  }
});
