// Spill: content over the threshold (100 KB by default) lives in the blob dir, the hash keeps a
// pointer, readers get the content transparently, and cleanup removes the blob with its entry.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { BlobStore } from '../../shared/vfs/blob-store.ts';
import { DirBlobStore } from '../../shared/vfs/blob-store.ts';
import { BlobStoreOwnedError, VirtualFs } from '../../shared/vfs/vfs.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const KB100 = 100 * 1024;
const meta = (writer: string, step = 1, status: 'active' | 'done' = 'done') => ({
  status,
  step,
  role: 'research-specialist',
  threadId: 'goal-x--research-specialist-1',
  writer,
});
/** Content of exactly `bytes` UTF-8 bytes, with multibyte characters in it. */
const content = (bytes: number, seed = 'a') => {
  const head = `${seed}:ünï:`;
  return head + 'x'.repeat(bytes - Buffer.byteLength(head));
};
const blobs = (goalId: string) => (existsSync(t.blobDirOf(goalId)) ? readdirSync(t.blobDirOf(goalId)) : []);

test('the default spill threshold is 100 KB', () => {
  assert.equal(t.rt.cfg.vfs.spillBytes, KB100);
});

test('content over 100 KB goes to the blob dir; the hash keeps only a pointer', async () => {
  const goalId = await t.newGoal();
  const big = content(KB100 + 1);
  const e = await t.rt.vfs.write(goalId, 'data/big.csv', big, meta('w'));
  assert.ok(e.blobRef, 'spilled entry has a blobRef');
  assert.equal(e.bytes, KB100 + 1);
  // The hashes hold no content: the entry has the pointer, the content hash no field.
  const raw = (await redis.client.hget(t.rt.vfs.keys.files(goalId), 'data/big.csv'))!;
  assert.ok(raw.length < 1000);
  assert.equal(JSON.parse(raw).blobRef, e.blobRef);
  assert.equal(await redis.client.hexists(t.rt.vfs.keys.content(goalId), 'data/big.csv'), 0);
  // The blob is a file in the blob dir, under the prefix and the goal id.
  assert.deepEqual(blobs(goalId), [e.blobRef!.split('/')[1]]);
  assert.equal(readFileSync(join(t.blobDirOf(goalId), blobs(goalId)[0]!), 'utf8'), big);
});

test('content of exactly 100 KB stays inline', async () => {
  const goalId = await t.newGoal();
  const e = await t.rt.vfs.write(goalId, 'edge.txt', content(KB100), meta('w'));
  assert.equal(e.blobRef, undefined);
  assert.equal((await redis.client.hget(t.rt.vfs.keys.content(goalId), 'edge.txt'))!.length > 0, true);
  assert.deepEqual(blobs(goalId), []);
});

test('reading a spilled artifact back is transparent', async () => {
  const goalId = await t.newGoal();
  const big = content(3 * KB100, 'read-back');
  await t.rt.vfs.write(goalId, 'report.md', big, meta('w'));
  assert.equal(await t.rt.vfs.read(goalId, 'report.md'), big);
  // Also through the read_files path a subagent's task uses: a spilled file that fits the
  // task's budget (vfs.taskMaxChars) goes in in full.
  const fits = content(KB100 + 1000, 'in-task');
  assert.ok(fits.length < t.rt.cfg.vfs.taskMaxChars);
  await t.rt.vfs.write(goalId, 'fits.md', fits, meta('w2'));
  const { buildSubagentTask } = await import('../../services/subagent-worker/task.ts');
  const task = await buildSubagentTask(t.rt, {
    goalId,
    step: 2,
    index: 0,
    role: 'critic',
    instruction: 'review',
    expected_artifact: 'critique.json',
    read_files: ['fits.md'],
  });
  assert.ok(task.includes(fits));
});

test('the spill threshold is configurable', async () => {
  const c = vfsRuntime(redis.url, { DEEPQ_SPILL_BYTES: '1000' });
  try {
    const goalId = await c.newGoal();
    assert.equal((await c.rt.vfs.write(goalId, 'small.txt', 'x'.repeat(1000), meta('a'))).blobRef, undefined);
    const e = await c.rt.vfs.write(goalId, 'over.txt', 'x'.repeat(1001), meta('b'));
    assert.ok(e.blobRef);
    assert.equal(await c.rt.vfs.read(goalId, 'over.txt'), 'x'.repeat(1001));
  } finally {
    await c.close();
  }
});

test('an overwrite removes the old blob, by another writer or by a retry of the same one', async () => {
  const goalId = await t.newGoal();
  const first = await t.rt.vfs.write(goalId, 'big.bin', content(KB100 + 10, 'one'), meta('w1'));
  const second = await t.rt.vfs.write(goalId, 'big.bin', content(KB100 + 20, 'two'), meta('w2', 2));
  assert.notEqual(first.blobRef, second.blobRef);
  assert.deepEqual(blobs(goalId), [second.blobRef!.split('/')[1]]);
  const retry = await t.rt.vfs.write(goalId, 'big.bin', content(KB100 + 30, 'three'), meta('w2', 2));
  assert.deepEqual(blobs(goalId), [retry.blobRef!.split('/')[1]]);
  assert.equal(await t.rt.vfs.read(goalId, 'big.bin'), content(KB100 + 30, 'three'));
  // Overwritten by small content: back inline, no blob left.
  await t.rt.vfs.write(goalId, 'big.bin', 'small now', meta('w3', 3));
  assert.deepEqual(blobs(goalId), []);
  assert.equal(await t.rt.vfs.read(goalId, 'big.bin'), 'small now');
  assert.equal(JSON.parse((await redis.client.hget(t.rt.vfs.keys.files(goalId), 'big.bin'))!).blobRef, undefined);
});

test('an inline artifact overwritten by spilled content leaves no stale inline copy', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'grow.md', 'tiny', meta('a'));
  await t.rt.vfs.write(goalId, 'grow.md', content(KB100 + 1, 'grown'), meta('b'));
  assert.equal(await redis.client.hexists(t.rt.vfs.keys.content(goalId), 'grow.md'), 0);
  assert.equal(await t.rt.vfs.read(goalId, 'grow.md'), content(KB100 + 1, 'grown'));
});

test('eviction removes the blob with its entry', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'old.csv', content(KB100 + 1, 'old'), meta('a', 1));
  await t.rt.vfs.write(goalId, 'new.csv', content(KB100 + 1, 'new'), meta('b', 4));
  assert.equal(blobs(goalId).length, 2);
  assert.deepEqual(await t.rt.vfs.evict(goalId, 5), [{ name: 'old.csv', reason: 'done_aged' }]);
  assert.equal(blobs(goalId).length, 1);
  assert.equal(await t.rt.vfs.read(goalId, 'old.csv'), null);
  assert.equal(await t.rt.vfs.read(goalId, 'new.csv'), content(KB100 + 1, 'new'));
  assert.equal((await t.rt.vfs.stat(goalId, 'old.csv'))!.blobRef, undefined, 'the tombstone keeps no pointer');
});

test('two names with the same content never share a blob: evicting one keeps the other readable', async () => {
  const goalId = await t.newGoal();
  const same = content(KB100 + 1, 'same');
  await t.rt.vfs.write(goalId, 'copy-a.txt', same, meta('a', 1));
  await t.rt.vfs.write(goalId, 'copy-b.txt', same, meta('b', 4));
  await t.rt.vfs.evict(goalId, 5);
  assert.equal(await t.rt.vfs.read(goalId, 'copy-a.txt'), null);
  assert.equal(await t.rt.vfs.read(goalId, 'copy-b.txt'), same);
  // And an overwrite of one with other content leaves the other intact too.
  await t.rt.vfs.write(goalId, 'copy-c.txt', same, meta('c', 5));
  await t.rt.vfs.write(goalId, 'copy-b.txt', 'other', meta('d', 5));
  assert.equal(await t.rt.vfs.read(goalId, 'copy-c.txt'), same);
});

test('a reader whose blob is deleted under it by an overwrite reads the new version, not an error', async () => {
  const goalId = await t.newGoal();
  const v1 = content(KB100 + 1, 'v1');
  const v2 = content(KB100 + 2, 'v2');
  await t.rt.vfs.write(goalId, 'hot.txt', v1, meta('w1'));
  // A blob store whose first get() waits until we let it go: the reader has read the entry
  // (pointing at v1's blob) but not the blob yet when the overwrite deletes that blob.
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let gets = 0;
  const base = t.rt.vfs.blobs;
  const slow: BlobStore = {
    put: (g, c) => base.put(g, c),
    get: async (ref) => {
      if (gets++ === 0) await gate;
      return base.get(ref);
    },
    delete: (ref) => base.delete(ref),
    deleteGoal: (g) => base.deleteGoal(g),
    listGoals: () => base.listGoals(),
    pruneGoal: (g, keep, olderThan) => base.pruneGoal(g, keep, olderThan),
    claimOwner: (id) => base.claimOwner(id),
    owner: () => base.owner(),
  };
  const reader = new VirtualFs(t.rt.redis, t.rt.cfg.prefix, slow, t.rt.vfs.opts);
  const pending = reader.read(goalId, 'hot.txt');
  await t.rt.vfs.write(goalId, 'hot.txt', v2, meta('w2', 2));
  assert.equal(blobs(goalId).length, 1, "v1's blob is gone");
  release();
  assert.equal(await pending, v2);
  assert.equal(gets, 2, 'the reader retried once');
});

test('a spilled artifact whose blob is missing fails loudly instead of reading as empty', async () => {
  const goalId = await t.newGoal();
  const e = await t.rt.vfs.write(goalId, 'lost.bin', content(KB100 + 1), meta('w'));
  rmSync(join(t.blobDirOf(goalId), e.blobRef!.split('/')[1]!));
  await assert.rejects(t.rt.vfs.read(goalId, 'lost.bin'), /lost\.bin .*is missing from the blob store/);
});

test("a spill into another deployment's blob store is refused, naming why; nothing is stored", async () => {
  const goalId = await t.newGoal();
  // This deployment spills first: the store is its own.
  await t.rt.vfs.write(goalId, 'mine.csv', content(KB100 + 1), meta('w'));
  // Another deployment (its own deployment id: here another prefix's) on the same blob dir and prefix.
  const store = new DirBlobStore(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix);
  const other = new VirtualFs(redis.client, `${t.rt.cfg.prefix}other`, store, t.rt.vfs.opts);
  const before = blobs(goalId).length;
  await assert.rejects(
    other.write(goalId, 'theirs.csv', content(KB100 + 1, 'b'), meta('w')),
    (err: Error) =>
      err instanceof BlobStoreOwnedError &&
      /belongs to another deployment .*give each deployment its own DEEPQ_BLOB_DIR/.test(err.message),
  );
  assert.equal(blobs(goalId).length, before, 'a blob was written into the store');
  assert.equal(await redis.client.hexists(other.keys.files(goalId), 'theirs.csv'), 0);
  // Its small artifacts (no blob) are written as ever.
  assert.equal((await other.write(goalId, 'small.md', 'fine', meta('w'))).version, 1);
});
