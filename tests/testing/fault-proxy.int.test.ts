// The Redis fault proxy (testing/fault-proxy.ts): real ioredis clients (RESP3, as ioredis 6
// speaks by default) and BullMQ through it to a private redis-server. Everything passes
// through unchanged; a dropped reply makes ioredis reconnect and re-send the command, so the
// command runs twice — the fault the proxy exists to provoke.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createRedis } from '../../shared/runtime/redis.ts';
import { type FaultProxy, startFaultProxy } from '../../testing/fault-proxy.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let proxy: FaultProxy;
const clients: Redis[] = [];

before(async () => {
  await redis.ready;
  proxy = await startFaultProxy({ host: '127.0.0.1', port: redis.server.port });
});
after(async () => {
  for (const c of clients) c.disconnect();
  await proxy?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function proxied(name: string, opts: { autoPipelining?: boolean } = {}): Redis {
  const c = createRedis(proxy.url, name, opts);
  clients.push(c);
  return c;
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(20);
  }
}

test('plain commands pass through unchanged, RESP3 replies of every shape included', async () => {
  const c = proxied('fp-plain');
  const direct = redis.client;
  const big = 'x'.repeat(3 * 1024 * 1024 + 7);
  await c.set('fp:big', big);
  await c.hset('fp:hash', { a: '1', b: '2' });
  await c.xadd('fp:stream', '*', 'f', 'v');
  await c.zadd('fp:z', 1.5, 'one', 2, 'two');
  assert.equal(await c.get('fp:big'), big);
  assert.equal(await c.get('fp:missing'), null);
  assert.deepEqual(await c.hgetall('fp:hash'), await direct.hgetall('fp:hash'));
  assert.deepEqual(await c.xrange('fp:stream', '-', '+'), await direct.xrange('fp:stream', '-', '+'));
  assert.deepEqual(
    await c.zrange('fp:z', '0', '-1', 'WITHSCORES'),
    await direct.zrange('fp:z', '0', '-1', 'WITHSCORES'),
  );
  assert.deepEqual(await c.eval('return {1, {2, "x"}, false}', 0), [1, [2, 'x'], null]);
  await assert.rejects(c.call('NOSUCHCOMMAND'), /unknown command/i);
  assert.equal(await c.ping(), 'PONG');
  assert.ok(proxy.commandCount('HELLO') >= 1, 'ioredis negotiated RESP3 through the proxy');
  assert.ok(proxy.commandCount('get') >= 2);
  assert.equal(proxy.stats().drops, 0);
});

test('pipelined and concurrent commands each get their own reply', async () => {
  const c = proxied('fp-pipe');
  const p = c.pipeline();
  for (let i = 0; i < 500; i++) {
    if (i % 3 === 0) p.incr('fp:pipe:n');
    else if (i % 3 === 1) p.set(`fp:pipe:${i}`, String(i));
    else p.get(`fp:pipe:${i - 1}`);
  }
  const results = await p.exec();
  results!.forEach(([err, value], i) => {
    assert.equal(err, null);
    if (i % 3 === 0) assert.equal(value, i / 3 + 1);
    else if (i % 3 === 1) assert.equal(value, 'OK');
    else assert.equal(value, String(i - 1));
  });
  const auto = proxied('fp-auto', { autoPipelining: true });
  const values = await Promise.all(Array.from({ length: 300 }, (_, i) => auto.echo(`v${i}`)));
  assert.deepEqual(
    values,
    Array.from({ length: 300 }, (_, i) => `v${i}`),
  );
});

test('a dropped INCR reply: the client reconnects, re-sends, and the counter ends at 2', async () => {
  const c = proxied('fp-incr');
  await c.ping();
  const before = proxy.stats();
  const dropped = proxy.dropReplyOnce((cmd) => cmd.name === 'INCR' && cmd.args[0] === 'fp:ctr');
  const value = await c.incr('fp:ctr');
  const cmd = await dropped;
  assert.deepEqual([cmd.name, cmd.args], ['INCR', ['fp:ctr']]);
  assert.equal(value, 2, 'the re-sent INCR ran a second time');
  assert.equal(await redis.client.get('fp:ctr'), '2');
  const now = proxy.stats();
  assert.equal(now.drops, before.drops + 1);
  assert.equal(now.connectionsOpened, before.connectionsOpened + 1, 'ioredis opened one new connection');
  assert.equal(now.commands.INCR - (before.commands.INCR ?? 0), 2, 'the proxy saw the INCR twice');
});

test('a RESP2 client (no HELLO) gets the same fault', async () => {
  const c = new Redis(proxy.url, { protocol: 2, maxRetriesPerRequest: null });
  c.on('error', () => {});
  clients.push(c);
  const hellos = proxy.commandCount('HELLO');
  await c.hset('fp:r2:h', { a: '1' });
  assert.deepEqual(await c.hgetall('fp:r2:h'), { a: '1' });
  assert.equal(proxy.commandCount('HELLO'), hellos, 'this client speaks RESP2');
  const dropped = proxy.dropReplyOnce('INCR');
  assert.equal(await c.incr('fp:r2:ctr'), 2);
  await dropped;
});

test('a dropped SET reply: the write took effect and the client still gets OK', async () => {
  const c = proxied('fp-set');
  await c.ping();
  const dropped = proxy.dropReplyOnce('set');
  assert.equal(await c.set('fp:k', 'v'), 'OK');
  assert.equal((await dropped).args[0], 'fp:k');
  assert.equal(await redis.client.get('fp:k'), 'v');
});

test('a dropped Lua script reply: the script ran once, was re-sent, and ran again', async () => {
  const c = proxied('fp-lua') as Redis & { fpIncr(key: string): Promise<number> };
  c.defineCommand('fpIncr', { numberOfKeys: 1, lua: "return redis.call('INCR', KEYS[1])" });
  assert.equal(await c.fpIncr('fp:lua'), 1);
  const dropped = proxy.dropReplyOnce(
    (cmd) => (cmd.name === 'EVALSHA' || cmd.name === 'EVAL') && cmd.args.includes('fp:lua'),
  );
  assert.equal(await c.fpIncr('fp:lua'), 3, 'one call, two runs');
  assert.equal((await dropped).name, 'EVALSHA');
  assert.equal(await redis.client.get('fp:lua'), '3');
});

test('a drop mid-pipeline delivers the replies before it, even large ones; ioredis aborts the rest', async () => {
  const c = proxied('fp-mid');
  const big = 'y'.repeat(2 * 1024 * 1024);
  await c.set('fp:mid:big', big);
  const dropped = proxy.dropReplyOnce((cmd) => cmd.name === 'INCR' && cmd.args[0] === 'fp:mid:b');
  const results = await c.pipeline().incr('fp:mid:a').get('fp:mid:big').incr('fp:mid:b').get('fp:mid:big').exec();
  await dropped;
  assert.deepEqual(
    results!.slice(0, 2),
    [
      [null, 1],
      [null, big],
    ],
    'the replies before the dropped one arrived whole',
  );
  // ioredis does not re-send a pipeline that was partly answered: it rejects the rest.
  for (const [err] of results!.slice(2)) assert.match(String(err), /Command aborted due to connection close/);
  assert.equal(await redis.client.get('fp:mid:b'), '1', 'the dropped INCR ran once');
});

test('a drop on the first command of a pipeline re-sends the whole pipeline', async () => {
  const c = proxied('fp-first');
  await c.ping();
  const dropped = proxy.dropReplyOnce((cmd) => cmd.name === 'INCR' && cmd.args[0] === 'fp:first:a');
  const results = await c.pipeline().incr('fp:first:a').incr('fp:first:b').exec();
  await dropped;
  assert.deepEqual(results, [
    [null, 2],
    [null, 2],
  ]);
});

test('a subscriber keeps receiving through the proxy and is never dropped on', async () => {
  const sub = proxied('fp-sub');
  const got: string[] = [];
  sub.on('message', (_channel: string, message: string) => got.push(message));
  await sub.subscribe('fp:chan');
  const armed = proxy.dropReplyOnce('PING');
  for (let i = 0; i < 20; i++) await redis.client.publish('fp:chan', `m${i}`);
  await until('20 messages', () => got.length === 20);
  assert.deepEqual(
    got,
    Array.from({ length: 20 }, (_, i) => `m${i}`),
  );
  await sub.ping();
  assert.ok(proxy.stats().untrackedConnections >= 1);
  armed.cancel();
  await assert.rejects(armed, /cancelled/);
  // Cut: ioredis reconnects and subscribes again, and messages flow again.
  proxy.cutAll();
  await until('the re-subscription', async () => (await redis.client.publish('fp:chan', 'again')) === 1);
  await until('a message after the cut', () => got.at(-1) === 'again');
});

test('cutAll makes clients reconnect and carry on, a blocked BLPOP included', async () => {
  const c = proxied('fp-cut');
  const blocker = proxied('fp-block');
  await Promise.all([c.ping(), blocker.ping()]);
  const popped = blocker.blpop('fp:list', 0);
  await until('BLPOP to block', () => proxy.commandCount('BLPOP') >= 1);
  await sleep(50);
  const opened = proxy.stats().connectionsOpened;
  assert.ok(proxy.cutAll() >= 2);
  assert.equal(await c.incr('fp:cut'), 1);
  await until('BLPOP to be re-sent', () => proxy.commandCount('BLPOP') >= 2);
  await redis.client.rpush('fp:list', 'item');
  assert.deepEqual(await popped, ['fp:list', 'item']);
  assert.ok(proxy.stats().connectionsOpened >= opened + 2);
});

test('delay adds latency in each direction and keeps order', async () => {
  const c = proxied('fp-delay');
  await c.ping();
  proxy.delay(60);
  try {
    const started = Date.now();
    const p = c.pipeline();
    for (let i = 0; i < 50; i++) p.echo(`d${i}`);
    const results = await p.exec();
    assert.ok(Date.now() - started >= 110, `round trip took ${Date.now() - started} ms`);
    assert.deepEqual(
      results!.map(([, v]) => v),
      Array.from({ length: 50 }, (_, i) => `d${i}`),
    );
  } finally {
    proxy.delay(0);
  }
  const started = Date.now();
  await c.ping();
  assert.ok(Date.now() - started < 100);
});

test('BullMQ: a queue and a worker run jobs end to end through the proxy, across a cut', async () => {
  const connection = proxied('fp-bull');
  const queue = new Queue('fp-jobs', { connection, prefix: 'fp' });
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const worker = new Worker(
    'fp-jobs',
    async (job) => {
      if (job.name === 'hold') await held;
      return { doubled: job.data.n * 2 };
    },
    { connection, prefix: 'fp' },
  );
  worker.on('error', () => {});
  queue.on('error', () => {});
  const completed = new Map<string, unknown>();
  worker.on('completed', (job, result) => completed.set(job.id!, result));
  try {
    const first = await queue.add('plain', { n: 21 });
    await until('the first job', () => completed.has(first.id!), 20_000);
    assert.deepEqual(completed.get(first.id!), { doubled: 42 });
    // A job in progress while every connection is cut still completes.
    const second = await queue.add('hold', { n: 5 });
    await until('the second job to start', async () => (await queue.getJobState(second.id!)) === 'active', 20_000);
    proxy.cutAll();
    release();
    await until('the second job', () => completed.has(second.id!), 20_000);
    assert.deepEqual((await queue.getJob(second.id!))?.returnvalue, { doubled: 10 });
  } finally {
    await worker.close();
    await queue.close();
  }
});
