// The ops server binds loopback unless told otherwise, and a burst of scrapes runs one
// refresh of the queue gauges, reused for a second. In-process, no Redis.

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { startOpsServer } from '../../shared/runtime/ops-server.ts';

const ready = async () => ({ ok: true, checks: {} });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function withServer(
  opts: Partial<Parameters<typeof startOpsServer>[0]>,
  fn: (base: string, address: AddressInfo) => Promise<void>,
): Promise<void> {
  const { server, port } = await startOpsServer({ port: 0, registry: new Registry(), ready, ...opts });
  try {
    const address = server.address() as AddressInfo;
    await fn(`http://127.0.0.1:${port}`, address);
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}

test('binds 127.0.0.1 by default, and the given host when one is set', async () => {
  await withServer({}, async (_base, address) => assert.equal(address.address, '127.0.0.1'));
  await withServer({ host: '0.0.0.0' }, async (_base, address) => assert.equal(address.address, '0.0.0.0'));
});

test('concurrent scrapes share one refresh; a scrape within the TTL reuses it; later ones refresh', async () => {
  let refreshes = 0;
  let running = 0;
  let maxRunning = 0;
  const beforeScrape = async () => {
    refreshes++;
    maxRunning = Math.max(maxRunning, ++running);
    await sleep(100);
    running--;
  };
  await withServer({ beforeScrape, refreshTtlMs: 1000 }, async (base) => {
    const res = await Promise.all(Array.from({ length: 25 }, () => fetch(`${base}/metrics`)));
    for (const r of res) assert.equal(r.status, 200);
    assert.equal(refreshes, 1, '25 concurrent scrapes ran one refresh');
    assert.equal(maxRunning, 1);
    const t = Date.now();
    await fetch(`${base}/metrics`);
    if (Date.now() - t < 900) assert.equal(refreshes, 1, 'a scrape within 1 s reused the counts');
    await sleep(1100);
    await Promise.all(Array.from({ length: 5 }, () => fetch(`${base}/metrics`)));
    assert.equal(refreshes, 2, 'past the TTL, one more refresh');
  });
});

test('a failed refresh is not cached, and a hung one does not hang the scrape', async () => {
  let calls = 0;
  let mode: 'fail' | 'hang' = 'fail';
  const beforeScrape = async () => {
    calls++;
    if (mode === 'fail') throw new Error('redis down');
    await new Promise(() => {});
  };
  await withServer({ beforeScrape, refreshTtlMs: 60_000, refreshWaitMs: 200 }, async (base) => {
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
    assert.equal(calls, 2, 'a failure is retried by the next scrape');
    mode = 'hang';
    const t = Date.now();
    const res = await Promise.all(Array.from({ length: 5 }, () => fetch(`${base}/metrics`)));
    for (const r of res) assert.equal(r.status, 200);
    assert.ok(Date.now() - t < 2000, 'scrapes waited at most refreshWaitMs');
    assert.equal(calls, 3, 'still one refresh in flight');
  });
});

test('a METRICS_HOST it cannot listen on is a config error naming it, not a raw getaddrinfo error', async () => {
  const cases: [string, RegExp][] = [
    ['not a host', /METRICS_HOST "not a host": cannot listen there \(no such host\)/],
    // TEST-NET-1: an address no machine here has.
    ['192.0.2.1', /METRICS_HOST "192\.0\.2\.1": cannot listen there \(not an address of this machine\)/],
  ];
  for (const [host, message] of cases) {
    await assert.rejects(
      startOpsServer({ port: 0, host, registry: new Registry(), ready: async () => ({ ok: true, checks: {} }) }),
      (err: Error) => {
        assert.equal(err.name, 'ConfigError');
        assert.match(err.message, message);
        return true;
      },
    );
  }
});
