// `deepq enqueue --file`: the files a goal starts with. Run as a user runs it (the CLI process,
// real services on a private Redis, the scripted model): the files are artifacts before the
// first plan, named by their path in the current directory (their base name outside it), marked
// input in the planner's index, read by the subtasks the plan gives them to, and never aged out
// by eviction. A file the VFS would refuse is refused before anything is stored, naming itself.

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { type Fleet, runCli, startFleet, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A scratch folder holding these files (relative path → content). */
function folderWith(files: Record<string, string | Buffer>): string {
  const dir = tempDir('deepq-inputs-');
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  return dir;
}

test('the files a goal starts with: artifacts before the plan, in the index as input, read by subtasks', async () => {
  await redis.ready;
  const fleet: Fleet = await startFleet(redis.url, { LOG_LEVEL: 'warn' });
  try {
    const cwd = folderWith({ 'docs/spec.md': 'Sort the values. MARKER-SPEC-7731\n' });
    const outside = folderWith({ 'notes.txt': 'MARKER-NOTES-1234\n' });
    const args = ['enqueue', 'Sort some numbers', '--file', 'docs/spec.md', '--file', join(outside, 'notes.txt')];
    const r = await runCli([...args, '--wait'], fleet.env, 60_000, cwd);
    assert.equal(r.code, 0, r.stderr);
    const goalId = r.stdout.split('\n')[0]!;
    assert.match(r.stdout, /created: Sort some numbers \(with docs\/spec\.md, notes\.txt\)/);

    const files = await fleet.client.artifacts(goalId);
    const spec = files.find((f) => f.name === 'docs/spec.md')!;
    assert.deepEqual([spec.status, spec.step, spec.writer, spec.input, spec.bytes], ['done', 0, 'input', true, 34]);
    assert.equal(await fleet.client.read(goalId, 'notes.txt'), 'MARKER-NOTES-1234\n', 'outside the cwd: its base name');
    const listed = await runCli(['artifacts', goalId], fleet.env);
    assert.match(listed.stdout, /^docs\/spec\.md +done +34 B +step 0 +input +v1$/m);

    const threads = (await runCli(['transcript', goalId], fleet.env)).stdout;
    const transcript = async (role: string) => {
      const id = new RegExp(`^(goal-${goalId}--${role}-\\w+)`, 'm').exec(threads)![1]!;
      return (await runCli(['transcript', id], fleet.env)).stdout;
    };
    // The first plan's index shows them as input (the first planner transcript saved is the oldest).
    const planners = [...threads.matchAll(new RegExp(`^(goal-${goalId}--planner-\\w+)`, 'gm'))].map((m) => m[1]!);
    const firstPlan = (await runCli(['transcript', planners.at(-1)!], fleet.env)).stdout;
    assert.match(firstPlan, /- docs\/spec\.md \[input, 34 bytes\]/);
    assert.match(firstPlan, /- notes\.txt \[input, 18 bytes\]/);
    // The scripted planner gives the inputs to the research and code subtasks: their contents are in the task.
    assert.match(await transcript('research-specialist'), /MARKER-SPEC-7731[\s\S]*MARKER-NOTES-1234/);
  } finally {
    await fleet.stop();
  }
});

test('an input file is never aged out: eviction takes the done work of its age, not it', async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const client = new GoalClient(loadConfig(env));
  try {
    const goalId = await client.enqueue({ goal: 'a long goal', files: [{ name: 'spec.md', content: 'the spec' }] });
    await client.vfs.write(goalId, 'old.md', 'old work', { status: 'done', step: 0, writer: 'w0' });
    // Past both ages (done after 3 cycles, any after 20).
    const evicted = await client.vfs.evict(goalId, 25);
    assert.deepEqual(
      evicted.map((e) => e.name),
      ['old.md'],
    );
    assert.equal(await client.read(goalId, 'spec.md'), 'the spec');
  } finally {
    await client.close();
  }
});

test('a file the VFS would refuse is refused before anything is stored, naming it and why', async () => {
  await redis.ready;
  const env = testEnv(redis.url, { DEEPQ_MAX_ARTIFACT_BYTES: '100', DEEPQ_MAX_FILES_PER_GOAL: '7' });
  const cwd = folderWith({
    'ok.md': 'fine',
    'docs/a.md': 'a',
    'bin.dat': Buffer.from([0x61, 0x00, 0x62]),
    'latin1.txt': Buffer.from([0x63, 0x61, 0x66, 0xe9]),
    'big.md': 'x'.repeat(200),
    'my notes.md': 'spaces',
  });
  const other = folderWith({ 'ok.md': 'another ok.md' });
  const cases: [string[], RegExp][] = [
    [['docs'], /--file "docs": is a folder: name its files/],
    [['bin.dat'], /--file "bin\.dat": looks binary \(a NUL byte\): artifacts are text/],
    [['latin1.txt'], /--file "latin1\.txt": is not UTF-8 text/],
    [['big.md'], /--file "big\.md": is 200 bytes \(an artifact holds at most 100\)/],
    [['my notes.md'], /--file "my notes\.md": artifact name "my notes\.md" has characters outside/],
    [['missing.md'], /--file "missing\.md": cannot be read \(ENOENT\)/],
    [['ok.md', join(other, 'ok.md')], /--file ".*ok\.md": named ok\.md, as --file "ok\.md" is/],
    [['ok.md', 'docs/a.md', 'bin.dat'], /looks binary/],
    [['ok.md', 'docs/a.md', 'latin1.txt'], /not UTF-8/],
  ];
  for (const [files, error] of cases) {
    const r = await runCli(['enqueue', 'a goal', ...files.flatMap((f) => ['--file', f])], env, 60_000, cwd);
    assert.equal(r.code, 1, `${files}: ${r.stdout}`);
    assert.match(r.stderr, error);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  // Three good files, a VFS that holds seven (five kept for the subtasks): checked before any is written.
  writeFileSync(join(other, 'c.md'), 'c');
  const three = ['ok.md', 'docs/a.md', join(other, 'c.md')];
  const r = await runCli(['enqueue', 'a goal', ...three.flatMap((f) => ['--file', f])], env, 60_000, cwd);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /3 input files: at most 2 \(a goal holds 7 files, 5 kept for its subtasks\)/);
  const client = new GoalClient(loadConfig(env));
  try {
    assert.deepEqual(await client.list(), [], 'no goal was stored');
    assert.deepEqual(await redis.client.keys(`${env.DEEPQ_PREFIX}:goal:*`), [], 'no file either');
  } finally {
    await client.close();
  }
});

test("an input over the spill size is refused where the blob dir is not the services'", async () => {
  await redis.ready;
  const theirs = tempDir('deepq-blobs-');
  const mine = tempDir('deepq-blobs-');
  dirs.push(theirs, mine);
  const base = testEnv(redis.url, { DEEPQ_SPILL_BYTES: '64', DEEPQ_BLOB_DIR: theirs });
  // The services' store: claimed for the deployment, as their first sweep or spill does.
  const services = new GoalClient(loadConfig(base));
  const { owner, deployment } = await services.vfs.blobStoreOwner();
  assert.equal(owner, deployment);
  const cwd = folderWith({ 'big.md': 'b'.repeat(100), 'small.md': 'small' });
  const enqueue = (env: NodeJS.ProcessEnv, ...files: string[]) =>
    runCli(['enqueue', 'a goal', ...files.flatMap((f) => ['--file', f])], env, 60_000, cwd);
  try {
    const elsewhere = await enqueue({ ...base, DEEPQ_BLOB_DIR: mine }, 'small.md', 'big.md');
    assert.equal(elsewhere.code, 1);
    assert.match(elsewhere.stderr, /input file big\.md is over DEEPQ_SPILL_BYTES \(64\): it goes to the blob store/);
    assert.ok(elsewhere.stderr.includes(`${mine} (DEEPQ_BLOB_DIR here) is not the services' one`));
    assert.deepEqual(await services.list(), [], 'nothing stored');
    // A dir another deployment claimed (the default one, used before with another Redis) says so.
    mkdirSync(join(mine, base.DEEPQ_PREFIX!), { recursive: true, mode: 0o700 });
    writeFileSync(join(mine, base.DEEPQ_PREFIX!, '.owner'), 'another-deployment');
    const claimed = await enqueue({ ...base, DEEPQ_BLOB_DIR: mine }, 'big.md');
    assert.equal(claimed.code, 1);
    assert.ok(claimed.stderr.includes(`${mine} (DEEPQ_BLOB_DIR here) belongs to another deployment`), claimed.stderr);
    assert.match(claimed.stderr, /Set DEEPQ_BLOB_DIR to this deployment's store/);
    assert.deepEqual(await services.list(), [], 'nothing stored');
    // Small enough to stay in Redis: from anywhere.
    assert.equal((await enqueue({ ...base, DEEPQ_BLOB_DIR: mine }, 'small.md')).code, 0);
    // From where the services' store is: spilled there, and read back through it.
    const here = await enqueue(base, 'big.md');
    assert.equal(here.code, 0, here.stderr);
    const goalId = here.stdout.trim();
    assert.ok((await services.artifacts(goalId))[0]!.blobRef, 'spilled');
    assert.equal(await services.read(goalId, 'big.md'), 'b'.repeat(100));
  } finally {
    await services.close();
  }
});
