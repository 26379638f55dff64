// Artifact names: a safe character set, length ≤ 200, no `..`, no leading `/`, no control
// characters. A refused name never reaches Redis or the blob store.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { createVfsTools } from '../../shared/agent/tools.ts';
import { VfsLimitError } from '../../shared/errors.ts';
import { useRedis } from '../../testing/redis.ts';
import { keysOfGoal, type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;

before(async () => {
  await redis.ready;
  t = vfsRuntime(redis.url, { DEEPQ_SPILL_BYTES: '10' });
});
after(async () => {
  await t?.close();
});

const meta = { status: 'done' as const, step: 1, role: 'critic', threadId: 'goal-x--critic-1', writer: 'w' };

/** Writes `name` (content over the spill threshold) and expects a VfsLimitError matching `rule`. */
async function refused(name: string, rule: RegExp): Promise<void> {
  const goalId = await t.newGoal();
  const before = await keysOfGoal(t.rt, goalId);
  await assert.rejects(
    t.rt.vfs.write(goalId, name, 'some content over the spill threshold', meta),
    (err: Error) => {
      assert.ok(
        err instanceof VfsLimitError,
        `${JSON.stringify(name).slice(0, 40)}: expected VfsLimitError, got ${err}`,
      );
      assert.match(err.message, rule);
      return true;
    },
    `name ${JSON.stringify(name).slice(0, 60)} was accepted`,
  );
  assert.throws(() => t.rt.vfs.check(name, ''), VfsLimitError);
  assert.deepEqual(await keysOfGoal(t.rt, goalId), before, 'a refused name changed Redis');
  assert.ok(!existsSync(t.blobDirOf(goalId)), 'a refused name reached the blob store');
}

test('names in the safe character set are accepted', async () => {
  const goalId = await t.newGoal();
  for (const name of ['report.md', 'a', '_x', 'A_b-1.2', 'src/pkg/mod_1.py', 'data/2025-01-01.csv', 'v1.0.tar.gz']) {
    await t.rt.vfs.write(goalId, name, `content of ${name}`, meta);
    assert.equal(await t.rt.vfs.read(goalId, name), `content of ${name}`);
  }
});

test('characters outside [A-Za-z0-9_.-/] are refused', async () => {
  for (const name of [
    'a b.md',
    'a$b',
    'a*b',
    'a?b',
    'a:b',
    'a\\b',
    'a"b',
    "a'b",
    'a;b',
    'a|b',
    'a%2e%2e',
    'résumé.md',
    'emoji-😀.md',
    'a\u00a0b',
    'a\u2028b',
  ]) {
    await refused(name, /characters outside/);
  }
});

test('a name must start with a letter, digit or underscore (no hidden or option-like names)', async () => {
  for (const name of ['.env', '-rf', '.hidden/file']) await refused(name, /characters outside/);
});

test('no part of a name may be hidden: report/.git/config would be git config where it is exported', async () => {
  for (const name of ['report/.git/config', 'a/.env', 'src/.github/workflows/ci.yml', 'x/.gitignore'])
    await refused(name, /hidden path segment/);
});

test('an empty name is refused', async () => {
  await refused('', /empty/);
});

test('names up to 200 characters are accepted; 201 and a 10 KB name are refused', async () => {
  const goalId = await t.newGoal();
  const max = `${'n'.repeat(196)}.txt`;
  assert.equal(max.length, 200);
  await t.rt.vfs.write(goalId, max, 'ok', meta);
  assert.equal(await t.rt.vfs.read(goalId, max), 'ok');
  await refused('n'.repeat(201), /201 chars \(max 200\)/);
  await refused('a'.repeat(10 * 1024), /10240 chars \(max 200\)/);
  await refused(`${'../'.repeat(3000)}x`, /chars \(max 200\)/);
});

test('".." is refused anywhere in a name', async () => {
  for (const name of ['../x', '..', 'a/../b', 'a/..', 'a/../../etc/passwd', 'x..y', '....'])
    await refused(name, /contains "\.\."/);
});

test('a leading "/" is refused', async () => {
  for (const name of ['/etc/passwd', '/x', '//x']) await refused(name, /starts with "\/"/);
});

test('a name is a file path: no trailing "/", no empty or "." segment (--out could not write it)', async () => {
  for (const name of ['src/', 'a.txt/']) await refused(name, /ends with "\/": name a file/);
  for (const name of ['x//y', 'a/./b', 'a/.']) await refused(name, /an empty or "\." path segment/);
});

test('control characters are refused: NUL, newline, CR, tab, ESC, DEL', async () => {
  for (const name of ['a\u0000b', 'a\nb', 'report.md\n', '\nx', 'a\rb', 'a\tb', 'a\u001bb', 'a\u007fb', 'a\u0001']) {
    await refused(name, /control characters/);
  }
});

test('the read_file and write_file tools refuse bad names before touching Redis', async () => {
  const goalId = await t.newGoal();
  const tools = createVfsTools(
    t.rt.vfs,
    { goalId, step: 1, role: 'code-writer', threadId: 'goal-x--code-writer-1', writer: 'w' },
    ['read_file', 'write_file'],
  );
  const [read, write] = tools as [(typeof tools)[0], (typeof tools)[0]];
  const before = await keysOfGoal(t.rt, goalId);
  for (const name of ['../x', '/etc/passwd', 'a\u0000b', 'x'.repeat(10 * 1024)]) {
    await assert.rejects(read.run({ name }), VfsLimitError);
    await assert.rejects(write.run({ name, content: 'x' }), VfsLimitError);
  }
  assert.deepEqual(await keysOfGoal(t.rt, goalId), before);
});
