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
