// Chaos with network faults: on top of a SIGKILL a second, the fleet reaches Redis through a
// fault proxy that loses the reply to one of deepq's scripts about every half second (ioredis
// re-sends it, or the job is retried), cuts every connection now and then, and Redis (AOF)
// is restarted once mid-run. Every goal still ends done, each artifact exactly once.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { assertNothingLost, type ChaosReport, formatReport, runChaos } from '../../testing/chaos.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis({ appendonly: true });
before(async () => {
  await redis.ready;
});

test('20 goals under SIGKILLs, lost replies, connection cuts and a Redis restart: all done, nothing twice', {
  timeout: 240_000,
}, async (t) => {
  const report: ChaosReport = await runChaos(redis.url, {
    goals: 20,
    replicas: 2,
    replicateAll: true,
    killEveryMs: 1000,
    latencyMs: 300,
    lockDurationMs: 4000,
    stalledIntervalMs: 1000,
    enqueueSpreadMs: 10_000,
    timeoutMs: 90_000,
    faults: { dropEveryMs: 500, cutEveryMs: 4000, restartAtMs: 5000, restartDownMs: 2000 },
    restartRedis: (downMs) => redis.server.restart(downMs),
    log: (s) => t.diagnostic(s),
  });
  const summary = formatReport(report);
  console.log(`chaos summary:\n${summary}`);
  assert.ok(report.faults && report.faults.drops > 0, 'no reply was lost');
  assert.equal(report.faults?.redisRestarts, 1);
  assertNothingLost(report);
});
