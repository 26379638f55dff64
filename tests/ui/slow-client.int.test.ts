// A live-stream client that keeps its connection open but stops reading must not make the
// inspector hold every later timeline entry for it: past a bound it is let go (its browser would
// reconnect and catch up from Redis), and the live-stream gauge goes back down. A HEAD request
// (a link checker, `curl -I`) leaves no stream and no file open.

import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { openEventStream, startUi, type UiProc, until } from './harness.ts';

const redis = useRedis();
let client: GoalClient;
let ui: UiProc;
let stalled: Socket;
before(async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  client = new GoalClient(loadConfig(env), createRedis(redis.url, 'deepq:test'));
  ui = await startUi(env);
});
after(async () => {
  stalled?.destroy();
  await client?.close();
});

const liveStreams = async () => {
  const body = await (await fetch(`http://127.0.0.1:${ui.svc.port}/metrics`)).text();
  return Number(/^deepq_ui_live_streams(?:\{[^}]*\})? (\S+)$/m.exec(body)?.[1] ?? Number.NaN);
};

test('a client that stops reading is let go once its backlog passes the bound', async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal followed by a client that stopped reading', {}, false);
  stalled = connect(ui.port, '127.0.0.1');
  stalled.write(`GET /goals/${goalId}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`);
  // It reads the response head, then nothing more: the kernel buffers fill, then the process's.
  await new Promise<void>((r) => stalled.once('data', () => r(void stalled.pause())));
  await until(async () => (await liveStreams()) === 1, 'the stream is open');
  // Entries big enough to fill the kernel's socket buffers (several MB on loopback) long before
  // the last: small ones all fit there, and a relay keeping up would never hold a backlog.
  const key = client.goals.keys.events(goalId);
  const reason = 'x'.repeat(4000);
  const base = { type: 'subtask_failed', step: 1, index: 0, role: 'critic', artifact: 'a.md', reason };
  for (let i = 0; i < 4000; i++) {
    const event = { ...base, at: Date.now(), attempt: i + 1 };
    await redis.client.xadd(key, 'MAXLEN', '~', '10000', '*', 'e', JSON.stringify(event));
  }
  await until(async () => (await liveStreams()) === 0, 'the stalled client was let go', 30_000);
  assert.match(ui.svc.output(), /live stream client not reading: closing it/);
});

test('a goal with more entries than the bound stays live for every viewer that has them', async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A long goal watched from two tabs', {}, false);
  const key = client.goals.keys.events(goalId);
  const add = (ms: number) => {
    const event = { type: 'tool_called', at: Date.now(), step: 1, index: 0, role: 'critic', tool: 'read_file' };
    return redis.client.xadd(key, '*', 'e', JSON.stringify({ ...event, ms, ok: true })) as Promise<string>;
  };
  let last = '';
  for (let i = 0; i < 2500; i++) last = await add(i);
  // Each tab has every entry (the page rendered them): the replay only rebuilds its cycles.
  const first = await openEventStream(ui.url, goalId, last);
  await first.waitFor(/event: goal/, 'the first tab gets the goal');
  const second = await openEventStream(ui.url, goalId, last);
  await second.waitFor(/event: goal/, 'the second tab gets the goal');
  const next = await add(2500);
  await first.waitFor(new RegExp(`id: ${next}`), 'the first tab gets the new entry');
  await second.waitFor(new RegExp(`id: ${next}`), 'the second tab gets the new entry');
  assert.equal(await liveStreams(), 2);
  first.close();
  second.close();
});

/** How many files under the blob dir the inspector process holds open. */
function openBlobFiles(): number {
  const dir = `/proc/${ui.svc.proc.pid}/fd`;
  const blobDir = client.cfg.vfs.blobDir;
  return readdirSync(dir).filter((fd) => {
    try {
      return readlinkSync(`${dir}/${fd}`).startsWith(blobDir);
    } catch {
      return false; // closed meanwhile
    }
  }).length;
}

test('HEAD requests leave no live stream and no artifact file open', async () => {
  const goalId = newGoalId();
  await client.goals.create(goalId, 'A goal checked by a link checker', {}, false);
  const meta = { status: 'done' as const, step: 1, role: 'critic', writer: 'w' };
  await client.vfs.write(goalId, 'big.txt', 'x'.repeat(client.cfg.vfs.spillBytes + 1), meta);
  const head = (path: string) => fetch(`${ui.url}${path}`, { method: 'HEAD' });
  for (let i = 0; i < 3; i++) {
    assert.equal((await head(`/goals/${goalId}/events`)).status, 200);
    assert.equal((await head(`/goals/${goalId}/artifact/raw?name=big.txt`)).status, 200);
    assert.equal((await head(`/goals/${goalId}/artifact?name=big.txt`)).status, 200);
  }
  await until(async () => (await liveStreams()) === 0, 'the HEAD streams ended', 5000);
  await until(() => openBlobFiles() === 0, 'the artifact files closed', 5000);
});
