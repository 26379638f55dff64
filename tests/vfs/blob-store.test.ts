// The directory blob store is private and trusts no name: its root and every directory it
// creates are 0700 and its files 0600 whatever the umask, an existing root is tightened,
// only goal-id directories are listed, and pruning removes only unreferenced blobs and write
// leftovers older than the cutoff. The default blob dir is the user's own, not the temp dir.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../shared/runtime/config.ts';
import { DirBlobStore } from '../../shared/vfs/blob-store.ts';

const base = mkdtempSync(join(tmpdir(), 'deepq-blobstore-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;
/** A blob dir that does not exist yet, two levels below a fresh temp dir. */
const freshDir = () => join(base, `case${n++}`, 'state', 'blobs');
const mode = (p: string) => statSync(p).mode & 0o777;
const GOAL = 'abc123def456';
const HEX = (c: string) => c.repeat(64);
const old = (p: string, ageMs: number) => utimesSync(p, new Date(Date.now() - ageMs), new Date(Date.now() - ageMs));

/** Runs `fn` with umask 0, so modes that rely on the umask would come out 0777 / 0666. */
async function withUmask0<T>(fn: () => Promise<T>): Promise<T> {
  const prev = process.umask(0);
  try {
    return await fn();
  } finally {
    process.umask(prev);
  }
}

test('every directory the store creates is 0700 and every blob 0600, whatever the umask', async () => {
  for (const umask0 of [false, true]) {
    const dir = freshDir();
    const store = new DirBlobStore(dir, 'deepq');
    const ref = await (umask0 ? withUmask0(() => store.put(GOAL, 'secret')) : store.put(GOAL, 'secret'));
    const goalDir = join(dir, 'deepq', GOAL);
    // The blob dir itself, the prefix root and the goal's dir: everything the store created.
    for (const d of [join(dir, '../..'), join(dir, '..'), dir, join(dir, 'deepq'), goalDir])
      assert.equal(mode(d), 0o700, `${relative(base, d)} (umask 0: ${umask0})`);
    const file = join(goalDir, ref.split('/')[1]!);
    assert.equal(mode(file), 0o600, `blob file (umask 0: ${umask0})`);
    assert.deepEqual(readdirSync(goalDir), [ref.split('/')[1]], 'no temp file is left');
    assert.equal(await store.get(ref), 'secret');
  }
});

test('an existing root with loose permissions is tightened to 0700', async () => {
  for (const op of ['put', 'listGoals'] as const) {
    const dir = freshDir();
    mkdirSync(join(dir, 'deepq'), { recursive: true });
    chmodSync(join(dir, 'deepq'), 0o755);
    const store = new DirBlobStore(dir, 'deepq');
    if (op === 'put') await store.put(GOAL, 'x');
    else await store.listGoals();
    assert.equal(mode(join(dir, 'deepq')), 0o700, `after ${op}`);
  }
});

test('a file where the blob dir or its prefix folder goes is a config error naming DEEPQ_BLOB_DIR', async () => {
  const file = join(base, `case${n++}-a-file`);
  writeFileSync(file, 'not a directory');
  const named = (err: Error) => err.name === 'ConfigError' && err.message.startsWith(`DEEPQ_BLOB_DIR ${file}: a file`);
  const under = new DirBlobStore(file, 'deepq');
  await assert.rejects(under.put(GOAL, 'x'), named);
  await assert.rejects(under.owner(), named);
  // The prefix's folder a file: the same.
  const dir = freshDir();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'deepq'), 'not a directory');
  await assert.rejects(new DirBlobStore(dir, 'deepq').put(GOAL, 'x'), (err: Error) => err.name === 'ConfigError');
});

test('listGoals lists only directories whose names are goal ids', async () => {
  const dir = freshDir();
  const store = new DirBlobStore(dir, 'deepq');
  await store.put(GOAL, 'x');
  const root = join(dir, 'deepq');
  for (const name of [`${GOAL}:files`, `${GOAL}:content`, 'NOT-A-GOAL', 'ab', `${GOAL}.bak`, 'a'.repeat(33)])
    mkdirSync(join(root, name));
  writeFileSync(join(root, 'fedcba654321'), 'a file, not a directory');
  assert.deepEqual(await store.listGoals(), [GOAL]);
  // And deleteGoal refuses anything else.
  await store.deleteGoal(`${GOAL}:files`);
  assert.ok(existsSync(join(root, `${GOAL}:files`)));
});

test('listGoals of a store that has nothing yet is empty', async () => {
  assert.deepEqual(await new DirBlobStore(freshDir(), 'deepq').listGoals(), []);
});

test('pruneGoal removes unreferenced blobs and temp leftovers older than the cutoff, nothing else', async () => {
  const dir = freshDir();
  const store = new DirBlobStore(dir, 'deepq');
  const goalDir = join(dir, 'deepq', GOAL);
  const HOUR = 3_600_000;
  const kept = await store.put(GOAL, 'referenced');
  const orphanOld = await store.put(GOAL, 'orphan, old');
  const orphanYoung = await store.put(GOAL, 'orphan, young');
  const tmpOld = join(goalDir, `${HEX('a')}.123.k3j4.tmp`);
  const tmpYoung = join(goalDir, `${HEX('b')}.123.k3j4.tmp`);
  const foreign = join(goalDir, 'notes.txt');
  for (const f of [tmpOld, tmpYoung, foreign]) writeFileSync(f, 'x');
  for (const f of [kept, orphanOld].map((r) => join(goalDir, r.split('/')[1]!)).concat(tmpOld, foreign))
    old(f, 2 * HOUR);

  const removed = await store.pruneGoal(GOAL, new Set([kept]), Date.now() - HOUR);
  assert.equal(removed, 2);
  const left = readdirSync(goalDir).sort();
  const names = (...refs: string[]) => refs.map((r) => r.split('/')[1]!);
  assert.deepEqual(left, [...names(kept, orphanYoung), `${HEX('b')}.123.k3j4.tmp`, 'notes.txt'].sort());
  assert.equal(await store.get(kept), 'referenced');
  assert.equal(await store.pruneGoal(`${GOAL}:files`, new Set(), Date.now()), 0, 'not a goal id');
  assert.equal(await store.pruneGoal('fedcba654321', new Set(), Date.now()), 0, 'no such goal dir');
});

test('the default blob dir is the user state dir, never under the temp dir', () => {
  // In the process that loads the config, as a service does (the default is read from its env).
  const blobDirOf = (env: NodeJS.ProcessEnv) =>
    execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "import('./shared/runtime/config.ts').then((m) => process.stdout.write(m.loadConfig().vfs.blobDir))",
      ],
      { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', cwd: resolve(import.meta.dirname, '../..') },
    );
  const home = join(base, 'home');
  const state = join(base, 'xdg-state');
  const withXdg = blobDirOf({ HOME: home, XDG_STATE_HOME: state });
  assert.equal(withXdg, join(state, 'deepq', 'blobs'));
  const fallback = blobDirOf({ HOME: '/home/someone', TMPDIR: tmpdir() });
  assert.equal(fallback, join('/home/someone', '.local', 'state', 'deepq', 'blobs'));
  assert.ok(!fallback.startsWith(tmpdir()), `${fallback} is under the temp dir`);
  // And in this process: not under the temp dir, whatever the env says.
  assert.ok(!loadConfig({}).vfs.blobDir.startsWith(resolve(tmpdir())));
});

test('loadConfig(env) takes the default blob dir from the env it is given', () => {
  const state = join(base, 'xdg-state-2');
  assert.equal(loadConfig({ XDG_STATE_HOME: state }).vfs.blobDir, join(state, 'deepq', 'blobs'));
});
