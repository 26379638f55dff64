// Virtual-FS writes: entry metadata, idempotent retries, versioned concurrency, limits.

import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { loadTranscript, transcriptWrite } from '../../shared/agent/transcripts.ts';
import { LockLostError, VersionConflictError, VfsLimitError } from '../../shared/errors.ts';
import { totalTokens, usageArgs } from '../../shared/goal/store.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, vfsRuntime, writeMeta } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const meta = writeMeta;

test('an entry carries status, step, bytes, role, threadId, version and updatedAt', async () => {
  const goalId = await t.newGoal();
  const before = Date.now();
  const content = 'résumé: ünïcode counts in bytes';
  const written = await t.rt.vfs.write(goalId, 'notes/summary.md', content, {
    status: 'active',
    step: 3,
    role: 'critic',
    threadId: `goal-${goalId}--critic-1a2b`,
    writer: `${goalId}:3:0`,
  });
  const e = (await t.rt.vfs.stat(goalId, 'notes/summary.md'))!;
  assert.equal(e.status, 'active');
  assert.equal(e.step, 3);
  assert.equal(e.bytes, Buffer.byteLength(content, 'utf8'));
  assert.notEqual(e.bytes, content.length, 'bytes are UTF-8 bytes, not characters');
  assert.equal(e.role, 'critic');
  assert.equal(e.threadId, `goal-${goalId}--critic-1a2b`);
  assert.equal(e.version, 1);
  assert.ok(e.updatedAt >= before && e.updatedAt <= Date.now());
  assert.equal(written.version, 1);

  // The metadata hash holds the entry and never the content; the content hash holds the content.
  const raw = JSON.parse((await redis.client.hget(t.rt.vfs.keys.files(goalId), 'notes/summary.md'))!);
  for (const field of ['status', 'step', 'bytes', 'role', 'threadId', 'version', 'updatedAt'])
    assert.ok(field in raw, `entry lacks ${field}`);
  assert.ok(!JSON.stringify(raw).includes('ünïcode'));
  assert.equal(await redis.client.hget(t.rt.vfs.keys.content(goalId), 'notes/summary.md'), content);
  assert.equal(await t.rt.vfs.read(goalId, 'notes/summary.md'), content);
});

test('the three statuses active, done and failed are stored as given', async () => {
  const goalId = await t.newGoal();
  for (const status of ['active', 'done', 'failed'] as const) {
    await t.rt.vfs.write(goalId, `${status}.md`, status, meta(`w-${status}`, { status }));
    assert.equal((await t.rt.vfs.stat(goalId, `${status}.md`))!.status, status);
  }
});

test('a retried writer (same writer id) overwrites its own artifact in place, never duplicates it', async () => {
  const goalId = await t.newGoal();
  const writer = `${goalId}:2:1`;
  const first = await t.rt.vfs.write(goalId, 'solution.py', 'print(1)', meta(writer, { step: 2, status: 'active' }));
  // The job is retried: it writes the same name again, even with the expectation it had
  // before its first attempt (the name did not exist then).
  const again = await t.rt.vfs.write(goalId, 'solution.py', 'print(2)', meta(writer, { step: 2, expectedVersion: 0 }));
  const third = await t.rt.vfs.write(goalId, 'solution.py', 'print(3)', meta(writer, { step: 2 }));
  assert.equal(first.version, 1);
  assert.equal(again.version, 1, 'a retry keeps the version: it is the same write');
  assert.equal(third.version, 1);
  assert.equal(await redis.client.hlen(t.rt.vfs.keys.files(goalId)), 1);
  assert.equal(await redis.client.hlen(t.rt.vfs.keys.content(goalId)), 1);
  const index = await t.rt.vfs.index(goalId);
  assert.deepEqual(
    index.map((e) => e.name),
    ['solution.py'],
  );
  assert.equal(index[0]!.status, 'done');
  assert.equal(await t.rt.vfs.read(goalId, 'solution.py'), 'print(3)');
});

test('a different writer to an existing name makes a new version', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'plan.md', 'v1', meta('a'));
  const e = await t.rt.vfs.write(goalId, 'plan.md', 'v2', meta('b', { step: 2 }));
  assert.equal(e.version, 2);
  assert.equal((await t.rt.vfs.stat(goalId, 'plan.md'))!.step, 2);
  assert.equal(await t.rt.vfs.read(goalId, 'plan.md'), 'v2');
});

test(
  '20 concurrent writers with the same expectedVersion: ' + 'exactly one wins, the others get VersionConflictError',
  async () => {
    const goalId = await t.newGoal();
    await t.rt.vfs.write(goalId, 'shared.md', 'base', meta('w-base'));
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        t.rt.vfs.write(goalId, 'shared.md', `content of writer ${i}`, meta(`w-${i}`, { step: 2, expectedVersion: 1 })),
      ),
    );
    const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [{ i, e: r.value }] : []));
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    assert.equal(won.length, 1, 'exactly one writer wins');
    assert.equal(lost.length, 19);
    for (const r of lost) {
      assert.ok(r.reason instanceof VersionConflictError, `expected VersionConflictError, got ${r.reason}`);
      assert.match(r.reason.message, /shared\.md is at version 2, expected 1/);
    }
    assert.equal(won[0]!.e.version, 2);
    // The winner's content is what is stored: no loser overwrote it afterwards.
    assert.equal(await t.rt.vfs.read(goalId, 'shared.md'), `content of writer ${won[0]!.i}`);
    assert.equal((await t.rt.vfs.stat(goalId, 'shared.md'))!.version, 2);
  },
);

test('20 concurrent creators of a new name (expectedVersion 0): exactly one wins', async () => {
  const goalId = await t.newGoal();
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) =>
      t.rt.vfs.write(goalId, 'fresh.md', `creator ${i}`, meta(`c-${i}`, { expectedVersion: 0 })),
    ),
  );
  const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
  assert.equal(won.length, 1);
  for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof VersionConflictError);
  assert.equal(await t.rt.vfs.read(goalId, 'fresh.md'), `creator ${won[0]}`);
  assert.equal((await t.rt.vfs.stat(goalId, 'fresh.md'))!.version, 1);
});

test('concurrent spilled writers: one wins and the losers leave no blob behind', async () => {
  const goalId = await t.newGoal();
  const big = (i: number) => `${i}`.padEnd(t.rt.cfg.vfs.spillBytes + 10, 'x');
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) =>
      t.rt.vfs.write(goalId, 'big.csv', big(i), meta(`s-${i}`, { expectedVersion: 0 })),
    ),
  );
  const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
  assert.equal(won.length, 1);
  assert.equal(await t.rt.vfs.read(goalId, 'big.csv'), big(won[0]!));
  assert.equal(readdirSync(t.blobDirOf(goalId)).length, 1, "only the winner's blob remains");
});

test(
  'concurrent writers without expectedVersion are serialized by version: ' +
    'every write counts, none is lost silently',
  async () => {
    const goalId = await t.newGoal();
    await t.rt.vfs.write(goalId, 'log.md', 'start', meta('w-start'));
    const entries = await Promise.all(
      Array.from({ length: 20 }, (_, i) => t.rt.vfs.write(goalId, 'log.md', `entry ${i}`, meta(`u-${i}`))),
    );
    const versions = entries.map((e) => e.version).sort((a, b) => a - b);
    assert.deepEqual(
      versions,
      Array.from({ length: 20 }, (_, i) => i + 2),
      'each write got its own version',
    );
    const last = entries.find((e) => e.version === 21)!;
    const final = (await t.rt.vfs.stat(goalId, 'log.md'))!;
    assert.equal(final.version, 21);
    assert.equal(final.writer, last.writer, "the stored content is the highest version's");
  },
);

test('a writer whose expectedVersion is stale is refused, and the stored artifact is untouched', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'doc.md', 'one', meta('a'));
  await t.rt.vfs.write(goalId, 'doc.md', 'two', meta('b', { expectedVersion: 1 }));
  await assert.rejects(
    t.rt.vfs.write(goalId, 'doc.md', 'three', meta('c', { expectedVersion: 1 })),
    VersionConflictError,
  );
  await assert.rejects(
    t.rt.vfs.write(goalId, 'missing.md', 'x', meta('c', { expectedVersion: 3 })),
    (err: Error) => err instanceof VersionConflictError && /does not exist/.test(err.message),
  );
  assert.equal(await t.rt.vfs.read(goalId, 'doc.md'), 'two');
  assert.equal(await t.rt.vfs.stat(goalId, 'missing.md'), null);
});

test('a write naming the entry it read is refused after any write since, a retried rewrite in place too', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'notes.md', 'line1 from A', meta('a'));
  const read = (await t.rt.vfs.stat(goalId, 'notes.md'))!;
  // A writes again: the same writer rewrites in place, at the same version.
  await t.rt.vfs.write(goalId, 'notes.md', 'line1 from A\nIMPORTANT line2 from A', meta('a'));
  assert.equal((await t.rt.vfs.stat(goalId, 'notes.md'))!.version, read.version);
  const seen = { expectedVersion: read.version, expectedOp: read.op };
  await assert.rejects(
    t.rt.vfs.write(goalId, 'notes.md', 'LINE1 from A', meta('b', seen)),
    (err: Error) => err instanceof VersionConflictError && /written again since it was read/.test(err.message),
  );
  await assert.rejects(t.rt.vfs.delete(goalId, 'notes.md', { step: 1, writer: 'b', ...seen }), VersionConflictError);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'line1 from A\nIMPORTANT line2 from A');
  // A's own delete leaves a tombstone at the same version: an edit of what was read does not revive it.
  await t.rt.vfs.delete(goalId, 'notes.md', { step: 1, writer: 'a' });
  await assert.rejects(t.rt.vfs.write(goalId, 'notes.md', 'revived', meta('b', seen)), VersionConflictError);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), null);
  // Unchanged since it was read: the write goes through.
  await t.rt.vfs.write(goalId, 'fresh.md', 'one', meta('a'));
  const fresh = (await t.rt.vfs.stat(goalId, 'fresh.md'))!;
  const e = await t.rt.vfs.write(goalId, 'fresh.md', 'two', meta('b', { expectedVersion: 1, expectedOp: fresh.op }));
  assert.equal(e.version, 2);
});

test(
  'max files per goal: a new name past the limit is refused with a clear error; ' +
    'overwrites and other goals are not',
  async () => {
    const small = vfsRuntime(redis.url, { DEEPQ_MAX_FILES_PER_GOAL: '3', DEEPQ_SPILL_BYTES: '10' });
    try {
      const goalId = await small.newGoal();
      for (const n of ['a.md', 'b.md', 'c.md']) await small.rt.vfs.write(goalId, n, n, meta(`w-${n}`));
      for (const content of ['d', 'd'.repeat(20) /* spilled */]) {
        await assert.rejects(
          small.rt.vfs.write(goalId, 'd.md', content, meta('w-d')),
          (err: Error) => err instanceof VfsLimitError && /already has 3 files \(max 3\)/.test(err.message),
        );
      }
      assert.equal(await small.rt.vfs.stat(goalId, 'd.md'), null);
      assert.deepEqual(
        existsSync(small.blobDirOf(goalId)) ? readdirSync(small.blobDirOf(goalId)) : [],
        [],
        'the refused spilled write left a blob',
      );
      // Overwriting an existing name adds no file.
      await small.rt.vfs.write(goalId, 'a.md', 'a2', meta('w-a2'));
      // The limit is per goal.
      const other = await small.newGoal();
      await small.rt.vfs.write(other, 'd.md', 'd', meta('w-d'));
      // Tombstones do not count: once a file is evicted there is room again.
      await small.rt.vfs.evict(goalId, 1 + small.rt.cfg.vfs.evictDoneAfterSteps + 1);
      await small.rt.vfs.write(goalId, 'd.md', 'd', meta('w-d', { step: 5 }));
      assert.equal((await small.rt.vfs.stat(goalId, 'd.md'))!.status, 'done');
    } finally {
      await small.close();
    }
  },
);

test('max artifact size: one byte over is refused with a clear error and nothing is stored', async () => {
  const small = vfsRuntime(redis.url, { DEEPQ_MAX_ARTIFACT_BYTES: '1000', DEEPQ_SPILL_BYTES: '100' });
  try {
    const goalId = await small.newGoal();
    await small.rt.vfs.write(goalId, 'exact.txt', 'x'.repeat(1000), meta('w1'));
    assert.equal((await small.rt.vfs.stat(goalId, 'exact.txt'))!.bytes, 1000);
    await assert.rejects(
      small.rt.vfs.write(goalId, 'over.txt', 'x'.repeat(1001), meta('w2')),
      (err: Error) => err instanceof VfsLimitError && /over\.txt is 1001 bytes \(max 1000\)/.test(err.message),
    );
    // The limit counts UTF-8 bytes: 501 "é" are 1002 bytes.
    await assert.rejects(small.rt.vfs.write(goalId, 'wide.txt', 'é'.repeat(501), meta('w3')), VfsLimitError);
    await small.rt.vfs.write(goalId, 'wide.txt', 'é'.repeat(500), meta('w3'));
    assert.equal(await small.rt.vfs.stat(goalId, 'over.txt'), null);
    // The refused write spilled nothing either: only the two accepted artifacts have blobs.
    assert.ok(existsSync(small.blobDirOf(goalId)));
    assert.equal(readdirSync(small.blobDirOf(goalId)).length, 2);
  } finally {
    await small.close();
  }
});

test('the default limits are 5 MB per artifact and a bounded number of files', () => {
  assert.equal(t.rt.cfg.vfs.maxArtifactBytes, 5 * 1024 * 1024);
  assert.ok(t.rt.cfg.vfs.maxFilesPerGoal > 0 && Number.isFinite(t.rt.cfg.vfs.maxFilesPerGoal));
  assert.throws(() => t.rt.vfs.check('a.md', 'x'.repeat(5 * 1024 * 1024 + 1)), VfsLimitError);
});

test('an event given with a write lands with it; a refused write appends nothing', async () => {
  const goalId = await t.newGoal();
  const ev = (artifact: string) =>
    ({ type: 'subtask_finished', step: 1, index: 0, role: 'critic', artifact, bytes: 2, ms: 5 }) as const;
  await t.rt.vfs.write(goalId, 'a.md', 'ok', meta('w1', { event: ev('a.md') }));
  const events = (await t.rt.goals.events(goalId)).map((e) => e.event);
  const last = events.at(-1)!;
  assert.deepEqual([last.type, 'artifact' in last && last.artifact], ['subtask_finished', 'a.md']);
  assert.ok(typeof last.at === 'number' && last.at > 0);
  const before = events.length;
  await assert.rejects(
    t.rt.vfs.write(goalId, 'a.md', 'again', meta('w2', { expectedVersion: 7, event: ev('a.md') })),
    VersionConflictError,
  );
  assert.equal((await t.rt.goals.events(goalId)).length, before, 'a refused write appended its event');
  // A stream this write created (the goal's keys gone) gets the backstop TTL, never none.
  await redis.client.del(t.rt.goals.keys.events(goalId), t.rt.goals.keys.files(goalId));
  await t.rt.vfs.write(goalId, 'b.md', 'ok', meta('w3', { event: ev('b.md') }));
  assert.ok((await redis.client.ttl(t.rt.goals.keys.events(goalId))) > 0);
});

test("a job's write is refused once its lock is gone or another worker's; nothing lands with it", async () => {
  const goalId = await t.newGoal();
  const key = `${t.rt.cfg.prefix}:sub-critic:${goalId}:1:0:lock`;
  const lock = { key, token: 'worker-a:1' };
  const ev = {
    type: 'subtask_finished',
    step: 1,
    index: 0,
    role: 'critic',
    artifact: 'a.md',
    bytes: 2,
    ms: 5,
  } as const;
  await redis.client.set(key, 'worker-a:1');
  await t.rt.vfs.write(goalId, 'a.md', 'v1', meta('w1', { lock }));
  const events = (await t.rt.goals.events(goalId)).length;
  // Another worker's delivery holds the lock now; then none does (it expired, not yet handed out).
  for (const holder of ['worker-b:7', null]) {
    if (holder) await redis.client.set(key, holder);
    else await redis.client.del(key);
    await assert.rejects(
      t.rt.vfs.write(goalId, 'a.md', 'late', meta('w1', { lock, event: ev })),
      (err: Error) => err instanceof LockLostError && /a\.md was not written: the job's lock/.test(err.message),
    );
    await assert.rejects(t.rt.vfs.delete(goalId, 'a.md', meta('w1', { lock })), LockLostError);
  }
  assert.equal(await t.rt.vfs.read(goalId, 'a.md'), 'v1');
  assert.equal((await t.rt.vfs.stat(goalId, 'a.md'))!.version, 1);
  assert.equal((await t.rt.goals.events(goalId)).length, events, 'a refused write appended its event');
  // A write outside a job (no lock) is not checked.
  await t.rt.vfs.write(goalId, 'a.md', 'v2', meta('w2'));
  assert.equal(await t.rt.vfs.read(goalId, 'a.md'), 'v2');
});

test("a transcript given with a write is stored with it, with its run's last call's usage booked", async () => {
  const goalId = await t.newGoal();
  const threadId = `goal-${goalId}--critic-77aa88bb`;
  const usage = usageArgs('critic', 'm-1', { input: 30, output: 12, cache_read: 0, cache_write: 0 });
  const messages = [{ role: 'user' as const, content: 'review it' }];
  const transcript = transcriptWrite(t.rt, goalId, threadId, 'critic', messages, usage);
  await t.rt.vfs.write(goalId, 'review.md', 'fine', meta('w1', { threadId, transcript }));
  assert.deepEqual((await loadTranscript(t.rt, threadId))?.messages, messages);
  assert.deepEqual(await redis.client.zrange(t.rt.goals.keys.threads(goalId), '0', '-1'), [threadId]);
  const g = (await t.rt.goals.get(goalId))!;
  assert.deepEqual([totalTokens(g.tokens), g.tokens.input, g.tokens.output], [42, 30, 12]);
  // A refused write changes no artifact, and still stores the run's transcript and usage: the
  // run happened (a version conflict here; a size limit, refused before Redis, the same).
  // Another run's last call: a usage record of its own (one record is booked once).
  const usage2 = usageArgs('critic', 'm-1', { input: 30, output: 12, cache_read: 0, cache_write: 0 });
  const other = transcriptWrite(t.rt, goalId, `goal-${goalId}--critic-99cc00dd`, 'critic', messages, usage2);
  await assert.rejects(
    t.rt.vfs.write(goalId, 'review.md', 'x', meta('w2', { expectedVersion: 9, transcript: other })),
    VersionConflictError,
  );
  assert.equal(await t.rt.vfs.read(goalId, 'review.md'), 'fine');
  assert.deepEqual((await loadTranscript(t.rt, `goal-${goalId}--critic-99cc00dd`))?.messages, messages);
  assert.equal(totalTokens((await t.rt.goals.get(goalId))!.tokens), 84);
  const third = transcriptWrite(t.rt, goalId, `goal-${goalId}--critic-99cc00ee`, 'critic', messages);
  const huge = 'x'.repeat(t.rt.vfs.opts.maxArtifactBytes + 1);
  await assert.rejects(t.rt.vfs.write(goalId, 'big.md', huge, meta('w3', { transcript: third })), VfsLimitError);
  assert.ok(await loadTranscript(t.rt, `goal-${goalId}--critic-99cc00ee`));
});
