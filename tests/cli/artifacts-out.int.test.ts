// `deepq artifacts <goal> --out DIR` writes all or nothing: names that map to one path
// (`b/c.md`, `b//c.md`, `b/./c.md`), a file where another name needs a directory (`report`
// and `report/z.md`), or an existing file or directory of the wrong kind in DIR are refused
// before anything is written, naming them; a normal set is written whole. Artifacts are
// written through the real virtual FS on a private Redis; the CLI runs as a user runs it.

import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { after, test } from 'node:test';
import { runCli } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

/** A goal holding these artifacts, each written by its own subtask. */
async function goalWith(files: Record<string, string>): Promise<string> {
  const goalId = await t.newGoal();
  let i = 0;
  for (const [name, content] of Object.entries(files)) {
    await t.rt.vfs.write(goalId, name, content, { status: 'done', step: 1, role: 'critic', writer: `w${i++}` });
  }
  return goalId;
}

/** Every file under dir (relative path → content), hidden ones included. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return out;
}

const scratches: string[] = [];
after(() => {
  for (const d of scratches) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = tempDir('deepq-out-');
  scratches.push(d);
  return d;
}

function assertRefused(r: { code: number | null; stdout: string; stderr: string }, problem: RegExp): void {
  assert.equal(r.code, 1, `exit ${r.code}\n${r.stdout}${r.stderr}`);
  assert.match(r.stderr, /^deepq: error: refusing to write artifacts to .*, nothing written: /);
  assert.match(r.stderr, problem, r.stderr);
  assert.equal(r.stderr.trim().split('\n').length, 1, `not one line:\n${r.stderr}`);
  assert.equal(r.stdout, '', 'a refused export printed written files');
}

test('a name that is a file where another needs a directory (report, report/z.md) is refused clearly', {
  timeout: 60_000,
}, async () => {
  await redis.ready;
  const goalId = await goalWith({ report: 'the report', 'report/z.md': 'z', 'x.md': 'x' });
  const out = join(scratch(), 'out');
  const r = await runCli(['artifacts', goalId, '--out', out], t.env);
  assertRefused(r, /"report" is a file but "report\/z\.md" needs report\/ to be a directory/);
  assert.equal(existsSync(out), false);
});

test('an existing file or directory of the wrong kind in DIR is refused, and DIR is left alone', {
  timeout: 60_000,
}, async () => {
  await redis.ready;
  const goalId = await goalWith({ 'docs/a.md': 'a', 'notes.md': 'n', 'ok.md': 'ok' });
  const out = scratch();
  writeFileSync(join(out, 'docs'), 'a file where a directory is needed');
  mkdirSync(join(out, 'notes.md'));
  writeFileSync(join(out, 'notes.md', 'inside'), 'a directory where a file would go');
  const before = tree(out);
  const r = await runCli(['artifacts', goalId, '--out', out], t.env);
  assertRefused(r, /docs is a file but "docs\/a\.md" needs it to be a directory/);
  assert.match(r.stderr, /notes\.md is a directory and "notes\.md" would replace it/);
  assert.deepEqual(tree(out), before);
  // DIR itself a file: refused the same way.
  const file = join(scratch(), 'plain');
  writeFileSync(file, 'x');
  assertRefused(await runCli(['artifacts', goalId, '--out', file], t.env), /plain exists and is not a directory/);
  assert.equal(readFileSync(file, 'utf8'), 'x');
  // A new DIR under that file, and a DIR that is a link to itself: named, not a raw ENOTDIR or ELOOP.
  const under = await runCli(['artifacts', goalId, '--out', join(file, 'sub')], t.env);
  assertRefused(under, /plain is a file, not a directory: .*plain\/sub cannot be made in it/);
  const loop = join(scratch(), 'loop');
  symlinkSync(loop, loop);
  assertRefused(
    await runCli(['artifacts', goalId, '--out', loop], t.env),
    /loop cannot be used: a symbolic link that loops/,
  );
});

test('a symbolic link to a directory inside DIR is refused, naming it, and nothing is written', {
  timeout: 60_000,
}, async () => {
  await redis.ready;
  // A model chooses the names; DIR/docs and DIR/site/pub point elsewhere (a web root, say).
  const goalId = await goalWith({ 'docs/index.html': '<p>model</p>', 'site/pub/x.html': 'x', 'ok.md': 'ok' });
  const out = scratch();
  const elsewhere = scratch();
  const alsoElsewhere = scratch();
  symlinkSync(elsewhere, join(out, 'docs'));
  mkdirSync(join(out, 'site'));
  symlinkSync(alsoElsewhere, join(out, 'site', 'pub'));
  const r = await runCli(['artifacts', goalId, '--out', out], t.env);
  assertRefused(r, /docs is a symbolic link \(to [^)]+\): "docs\/index\.html" would be written through it/);
  assert.ok(r.stderr.includes(`(to ${elsewhere})`), r.stderr);
  assert.match(r.stderr, /site\/pub is a symbolic link \(to [^)]+\): "site\/pub\/x\.html"/);
  assert.deepEqual(readdirSync(elsewhere), []);
  assert.deepEqual(readdirSync(alsoElsewhere), []);
  assert.deepEqual(readdirSync(out).sort(), ['docs', 'site']);
  assert.deepEqual(readdirSync(join(out, 'site')), ['pub']);
});

test('a normal set is written whole: into a new DIR (parents made), and into an existing one', {
  timeout: 60_000,
}, async () => {
  await redis.ready;
  const big = `${'line of a spilled artifact\n'.repeat(5000)}end\n`;
  const files = { 'a.md': '# A\n\ttabbed\n', 'sub/b.md': 'b', 'sub/deep/c.txt': 'ç ü 日本', 'big.txt': big };
  const goalId = await goalWith(files);
  const parent = scratch();
  const out = join(parent, 'new', 'out');
  const r = await runCli(['artifacts', goalId, '--out', out], t.env);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.deepEqual(tree(out), files);
  for (const name of Object.keys(files)) {
    const bytes = Buffer.byteLength(files[name as keyof typeof files]);
    assert.ok(r.stdout.includes(`${join(out, name)}  (${bytes} bytes)`), r.stdout);
  }
  // No temporary directory is left beside DIR.
  assert.deepEqual(readdirSync(join(parent, 'new')), ['out']);
  // DIR has the mode any new directory gets here (0777 less the umask), like its subdirectories.
  const probe = join(parent, 'probe');
  mkdirSync(probe);
  const usual = statSync(probe).mode & 0o777;
  assert.equal((statSync(out).mode & 0o777).toString(8), usual.toString(8));
  assert.equal((statSync(join(out, 'sub')).mode & 0o777).toString(8), usual.toString(8));
  // Into an existing DIR: others' files stay, an artifact's earlier copy is replaced.
  const existing = scratch();
  writeFileSync(join(existing, 'keep.txt'), 'mine');
  mkdirSync(join(existing, 'sub'));
  writeFileSync(join(existing, 'sub', 'b.md'), 'old b');
  const r2 = await runCli(['artifacts', goalId, '--out', existing], t.env);
  assert.equal(r2.code, 0, r2.stdout + r2.stderr);
  assert.deepEqual(tree(existing), { ...files, 'keep.txt': 'mine' });
  assert.ok(statSync(join(existing, 'sub', 'deep')).isDirectory());
});

test('a DIR whose parent cannot be made (/proc/nope/x) fails quickly, naming that directory', {
  timeout: 60_000,
  skip: existsSync('/proc/self') ? false : 'no /proc here',
}, async () => {
  await redis.ready;
  const goalId = await goalWith({ 'a.md': 'a' });
  // Node 20's recursive mkdir spins for ever on this; runCli kills the CLI after 15 s.
  const started = Date.now();
  const r = await runCli(['artifacts', goalId, '--out', '/proc/nope/x'], t.env, 15_000);
  assert.equal(r.code, 1, `exit ${r.code}\n${r.stdout}${r.stderr}`);
  assert.match(r.stderr, /^deepq: error: could not create the directory \/proc\/nope for \/proc\/nope\/x, nothing /);
  assert.match(r.stderr, /ENOENT/);
  assert.equal(r.stderr.trim().split('\n').length, 1, `not one line:\n${r.stderr}`);
  assert.equal(r.stdout, '');
  assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  // A parent that is a file: named the same way, and nothing is left behind.
  const parent = scratch();
  writeFileSync(join(parent, 'file'), 'x');
  const r2 = await runCli(['artifacts', goalId, '--out', join(parent, 'file', 'a', 'out')], t.env, 15_000);
  assert.equal(r2.code, 1, r2.stdout + r2.stderr);
  assert.ok(r2.stderr.includes(`${join(parent, 'file')} is a file, not a directory`), r2.stderr);
  assert.deepEqual(tree(parent), { file: 'x' });
});

test('a new DIR several levels deep (a/b/c/out) is made, parents and all', { timeout: 60_000 }, async () => {
  await redis.ready;
  const files = { 'x.md': 'x', 'sub/y.md': 'y' };
  const goalId = await goalWith(files);
  const parent = scratch();
  const out = join(parent, 'a', 'b', 'c', 'out');
  const r = await runCli(['artifacts', goalId, '--out', out], t.env, 15_000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.deepEqual(tree(out), files);
  assert.ok(r.stdout.includes(`${join(out, 'sub', 'y.md')}  (1 bytes)`), r.stdout);
  assert.deepEqual(readdirSync(join(parent, 'a', 'b', 'c')), ['out']);
});
