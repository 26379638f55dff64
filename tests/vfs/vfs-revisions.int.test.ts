// A planned revision of a done artifact: one that finishes is the new version (the old one in
// the history); one that does not (it failed, or stopped at its token cap) leaves the done version
// current, put back over the run's own tool writes, with the unfinished output in the history.

import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, writeMeta } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const FIRST = 'v1:'; // the done version's writer (cycle 1's subtask)
const REVISER = 'v2:'; // the revising subtask of cycle 2
const blobs = (goalId: string) => (existsSync(t.blobDirOf(goalId)) ? readdirSync(t.blobDirOf(goalId)) : []);
const big = (seed: string) => seed.repeat(t.rt.cfg.vfs.spillBytes / seed.length + 1);

async function doneNotes(content = 'good notes'): Promise<string> {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'notes.md', content, writeMeta(FIRST));
  return goalId;
}

test('a revision that fails without writing leaves the done version as it was', async () => {
  const goalId = await doneNotes();
  await t.rt.vfs.write(
    goalId,
    'notes.md',
    'a broken answer',
    writeMeta(REVISER, { status: 'failed', step: 2, keepDone: true }),
  );
  const e = (await t.rt.vfs.stat(goalId, 'notes.md'))!;
  assert.deepEqual([e.status, e.version, e.step, e.writer], ['done', 1, 1, FIRST]);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'good notes');
  assert.deepEqual(await t.rt.vfs.history(goalId, 'notes.md'), []);
});

test('a revision that fails after its tools wrote a draft puts the done version back', async () => {
  const goalId = await doneNotes();
  const tool = writeMeta(REVISER, { status: 'active', step: 2, keepHistory: true });
  await t.rt.vfs.write(goalId, 'notes.md', 'half a draft', tool);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'half a draft');
  await t.rt.vfs.write(
    goalId,
    'notes.md',
    'gave up',
    writeMeta(REVISER, { status: 'active', step: 2, keepDone: true }),
  );
  const e = (await t.rt.vfs.stat(goalId, 'notes.md'))!;
  assert.deepEqual([e.status, e.version, e.step, e.writer], ['done', 3, 1, FIRST]);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'good notes');
  const history = await t.rt.vfs.history(goalId, 'notes.md');
  assert.deepEqual(
    history.map((h) => [h.version, h.status, h.step, h.content]),
    [[2, 'active', 2, 'gave up']],
  );
  // A later revision that finishes is the next version, as any revision.
  const next = writeMeta('v3:', { step: 3, keepHistory: true });
  assert.equal((await t.rt.vfs.write(goalId, 'notes.md', 'better notes', next)).version, 4);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'better notes');
});

test('spilled versions: the done blob stays readable, a dropped output leaves no blob behind', async () => {
  const goalId = await doneNotes(big('good '));
  assert.equal(blobs(goalId).length, 1);
  const failed = writeMeta(REVISER, { status: 'failed', step: 2, keepDone: true });
  await t.rt.vfs.write(goalId, 'notes.md', big('bad '), failed);
  assert.equal(blobs(goalId).length, 1, 'the failed output was not stored: its blob went');
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), big('good '));

  const tool = writeMeta(REVISER, { status: 'active', step: 2, keepHistory: true });
  await t.rt.vfs.write(goalId, 'notes.md', big('draft '), tool);
  await t.rt.vfs.write(goalId, 'notes.md', big('gave up '), failed);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), big('good '));
  const [kept] = await t.rt.vfs.history(goalId, 'notes.md');
  assert.equal(kept?.content, big('gave up '));
  // The done version's blob and the failed output's: the draft's went.
  assert.equal(blobs(goalId).length, 2);
});

test('a revision that finishes is the new version, the done one kept in the history', async () => {
  const goalId = await doneNotes();
  await t.rt.vfs.write(goalId, 'notes.md', 'revised notes', writeMeta(REVISER, { step: 2, keepDone: true }));
  const e = (await t.rt.vfs.stat(goalId, 'notes.md'))!;
  assert.deepEqual([e.status, e.version, e.writer], ['done', 2, REVISER]);
  const history = await t.rt.vfs.history(goalId, 'notes.md');
  assert.deepEqual(
    history.map((h) => [h.version, h.content]),
    [[1, 'good notes']],
  );
});

test('the history keeps the 3 newest versions of a name, however its versions were numbered', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'report.md', big('v0 '), writeMeta('job-1'));
  for (let i = 2; i <= 8; i++) {
    const writer = `job-${i}`;
    // Each revision starts over: a draft (its write_file of its own artifact keeps the done
    // version in the history), deleted, then its result (versions skip numbers).
    const draft = writeMeta(writer, { status: 'active', step: i, keepHistory: true });
    await t.rt.vfs.write(goalId, 'report.md', big(`draft${i} `), draft);
    await t.rt.vfs.delete(goalId, 'report.md', { step: i, writer });
    await t.rt.vfs.write(goalId, 'report.md', big(`final${i} `), writeMeta(writer, { step: i, keepHistory: true }));
  }
  const kept = await t.rt.vfs.history(goalId, 'report.md');
  assert.equal(kept.length, 3, `versions kept: ${kept.map((e) => e.version).join(', ')}`);
  assert.match(kept[0]!.content!, /^final7 /);
  // The current version's blob and the 3 kept ones: no other blob is left.
  assert.equal(blobs(goalId).length, 4);
});

test("a name's kept versions go with it when it is evicted; a name used again never gets them back", async () => {
  const goalId = await t.newGoal();
  const v = t.rt.vfs;
  await v.write(goalId, 'plan.md', big('OLD A '), writeMeta('A', { step: 1, keepHistory: true }));
  await v.write(goalId, 'plan.md', 'OLD B', writeMeta('B', { step: 2, keepHistory: true }));
  assert.equal((await v.history(goalId, 'plan.md')).length, 1);
  // A younger name's versions stay: only the evicted name's go.
  await v.write(goalId, 'plan.md.bak', 'NEW A', writeMeta('A', { step: 6, keepHistory: true }));
  await v.write(goalId, 'plan.md.bak', 'NEW B', writeMeta('B', { step: 6, keepHistory: true }));
  await v.evict(goalId, 7);
  assert.deepEqual(await v.history(goalId, 'plan.md'), []);
  assert.deepEqual(
    (await v.history(goalId, 'plan.md.bak')).map((h) => h.content),
    ['NEW A'],
  );
  assert.deepEqual(blobs(goalId), [], "the evicted artifact's old version kept its blob");
  await v.evict(goalId, 8); // the tombstone goes
  assert.equal(await v.stat(goalId, 'plan.md'), null);
  // At step 9 the name is used again: another job's tool writes it, then its owner, whose run fails.
  await v.write(goalId, 'plan.md', 'D notes', writeMeta('D', { status: 'active', step: 9, refuseDone: true }));
  await v.write(goalId, 'plan.md', 'C draft', writeMeta('C', { status: 'active', step: 9, keepHistory: true }));
  await v.write(goalId, 'plan.md', 'C gave up', writeMeta('C', { status: 'failed', step: 9, keepDone: true }));
  assert.equal(await v.read(goalId, 'plan.md'), 'C gave up');
});
