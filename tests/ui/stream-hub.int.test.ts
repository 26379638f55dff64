// The inspector's stream hub against a real Redis: viewers that join a busy timeline at any
// point get every entry after their id exactly once, in order; one blocking reader serves all
// viewers of a stream (it waits in XREAD BLOCK, it does not poll) and goes with the last one.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { type StreamEntry, StreamHub } from '../../services/ui/stream-hub.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from './harness.ts';

const redis = useRedis();
let hub: StreamHub;
const READER_NAME = 'deepq:test:hub-reader';

before(async () => {
  await redis.ready;
  hub = new StreamHub(redis.client, () => createRedis(redis.url, READER_NAME), pino({ level: 'silent' }));
});
after(() => hub?.close());

/** The hub's blocking readers as Redis sees them: the command each is in. */
async function readers(): Promise<string[]> {
  const list = (await redis.client.client('LIST')) as string;
  return list
    .split('\n')
    .filter((l) => l.includes(`name=${READER_NAME}`))
    .map((l) => /cmd=(\S+)/.exec(l)?.[1] ?? '');
}

test('viewers joining a busy stream at any id get each later entry once, in order; one reader per stream', async () => {
  const key = 'hub-test:events';
  const written: string[] = [];
  let writing = true;
  const writer = (async () => {
    for (let i = 0; writing; i++) {
      written.push((await redis.client.xadd(key, '*', 'e', String(i)))!);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const viewers: { from: string | undefined; got: string[]; stop: () => void }[] = [];
  for (let v = 0; v < 8; v++) {
    await new Promise((r) => setTimeout(r, 15 + v * 5));
    // From the start, from a recent entry, or from one long gone by.
    const from = v % 3 === 0 ? undefined : written[Math.max(0, written.length - 1 - (v % 3 === 1 ? 2 : 40))];
    const got: string[] = [];
    const stop = await hub.subscribe(key, from, (entries: StreamEntry[]) => got.push(...entries.map((e) => e.id)));
    viewers.push({ from, got, stop });
  }
  assert.equal(hub.openFeeds, 1);
  await until(async () => (await readers()).length === 1 && (await readers())[0] === 'xread', 'the reader blocking');
  await new Promise((r) => setTimeout(r, 100));
  writing = false;
  await writer;
  const last = written.at(-1)!;
  await until(() => viewers.every((v) => v.got.at(-1) === last), 'every viewer to reach the last entry');
  for (const [i, v] of viewers.entries()) {
    const expected = v.from === undefined ? written : written.slice(written.indexOf(v.from) + 1);
    assert.deepEqual(v.got, expected, `viewer ${i} (from ${v.from ?? 'the start'})`);
  }
  assert.deepEqual(await readers(), ['xread'], 'one blocking reader for the stream');

  for (const v of viewers) v.stop();
  assert.equal(hub.openFeeds, 0);
  await until(async () => (await readers()).length === 0, 'the reader closed with the last viewer');
});
