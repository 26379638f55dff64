// The built-in virtual-FS tools, each over a real VirtualFs on a private Redis (blob store
// included): edit_file's exact replacement (0, 1, many matches, replace_all, a result over the
// artifact limit refused before it is built) writing new versions, grep's bounds (matches, line
// length, scanned text, time) and errors, list_files with a glob, delete_file's tombstone, and
// read_file's paging kept. Each tool's errors are thrown with a message naming the problem (the
// agent loop turns them into is_error results).

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { TOOL_NAMES } from '../../shared/agent/roles.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import {
  createSandboxTools,
  createVfsTools,
  GREP_LIMITS,
  type Tool,
  type VfsToolOptions,
} from '../../shared/agent/tools.ts';
import { LockLostError } from '../../shared/errors.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';
import { formatIndex } from '../../shared/vfs/vfs.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

// Files another job of this cycle wrote (active): tools may change them; a done one is tested apart.
const seed = { status: 'active' as const, step: 1, role: 'research-specialist', writer: 'seed' };
const STEP = 3;

function toolsOf(goalId: string, opts: VfsToolOptions = {}): Record<string, Tool> {
  const scope = { goalId, step: STEP, role: 'code-writer', threadId: `goal-${goalId}--code-writer-1`, writer: 'job-1' };
  const tools = createVfsTools(t.rt.vfs, scope, [...TOOL_NAMES], opts);
  return Object.fromEntries(tools.map((x) => [x.def.name, x]));
}

async function goalWith(files: Record<string, string>): Promise<string> {
  const goalId = await t.newGoal();
  for (const [name, content] of Object.entries(files)) await t.rt.vfs.write(goalId, name, content, seed);
  return goalId;
}

// ---- edit_file ---------------------------------------------------------------------------

test('edit_file replaces the one occurrence of old_string and writes a new version', async () => {
  const goalId = await goalWith({ 'app.py': 'def f():\n    return 1\n\nprint(f())\n' });
  const { edit_file } = toolsOf(goalId);
  const out = await edit_file!.run({ name: 'app.py', old_string: '    return 1', new_string: '    return 2' });
  assert.equal(
    out,
    `edited app.py: replaced 1 occurrence (${'def f():\n    return 2\n\nprint(f())\n'.length} bytes, version 2)`,
  );
  assert.equal(await t.rt.vfs.read(goalId, 'app.py'), 'def f():\n    return 2\n\nprint(f())\n');
  const e = (await t.rt.vfs.stat(goalId, 'app.py'))!;
  assert.deepEqual([e.version, e.status, e.step, e.role, e.writer], [2, 'active', STEP, 'code-writer', 'job-1']);
  // Replacement text is taken literally: no $& or $1 patterns.
  await edit_file!.run({ name: 'app.py', old_string: 'print(f())', new_string: "print('$& $1 $$')" });
  assert.match((await t.rt.vfs.read(goalId, 'app.py'))!, /print\('\$& \$1 \$\$'\)\n$/);
});

test('edit_file with no match, or several without replace_all, changes nothing and says why', async () => {
  const content = 'x = 1\ny = x\nz = 2\nw = x\n';
  const goalId = await goalWith({ 'v.py': content });
  const { edit_file } = toolsOf(goalId);
  await assert.rejects(
    edit_file!.run({ name: 'v.py', old_string: 'q = 9', new_string: 'q = 8' }),
    /^Error: old_string was not found in v\.py; nothing was changed\. Read the file and copy the text exactly/,
  );
  await assert.rejects(
    edit_file!.run({ name: 'v.py', old_string: 'x', new_string: 'k' }),
    /^Error: old_string occurs 3 times in v\.py \(at lines 1, 2, 4\); nothing was changed\. .*replace_all: true/,
  );
  // Matches on one line, after blank lines, past the 10 named: each named by its own line.
  const many = await goalWith({ 'm.txt': `\n\nab ab\n${'ab\n'.repeat(12)}` });
  await assert.rejects(
    toolsOf(many).edit_file!.run({ name: 'm.txt', old_string: 'ab', new_string: 'c' }),
    /occurs 14 times in m\.txt \(at lines 3, 3, 4, 5, 6, 7, 8, 9, 10, 11, …\)/,
  );
  await assert.rejects(
    edit_file!.run({ name: 'v.py', old_string: 'x', new_string: 'x' }),
    /old_string and new_string are the same/,
  );
  await assert.rejects(
    edit_file!.run({ name: 'v.py', old_string: '', new_string: 'k' }),
    /^ValidationError: bad arguments for edit_file: old_string: old_string must not be empty/,
  );
  await assert.rejects(
    edit_file!.run({ name: 'v.py', old: 'x', new_string: 'k' }),
    /bad arguments for edit_file: old_string: .*; \(root\): Unrecognized key: "old"/,
  );
  await assert.rejects(edit_file!.run({ name: 'nope.py', old_string: 'a', new_string: 'b' }), /no such file: nope\.py/);
  await assert.rejects(edit_file!.run({ name: '../x/v.py', old_string: 'a', new_string: 'b' }), /contains "\.\."/);
  assert.equal(await t.rt.vfs.read(goalId, 'v.py'), content, 'unchanged');
  assert.equal((await t.rt.vfs.stat(goalId, 'v.py'))!.version, 1, 'no new version');

  const out = await edit_file!.run({ name: 'v.py', old_string: 'x', new_string: 'k', replace_all: true });
  assert.match(out, /^edited v\.py: replaced 3 occurrences \(\d+ bytes, version 2\)$/);
  assert.equal(await t.rt.vfs.read(goalId, 'v.py'), 'k = 1\ny = k\nz = 2\nw = k\n');
  // replace_all with a single occurrence is fine too.
  assert.match(await edit_file!.run({ name: 'v.py', old_string: 'z', new_string: 'j', replace_all: true }), /1 occ/);
});

test('edit_file edits a spilled artifact (read from and written back to the blob store)', async () => {
  const big = `${'line of filler text\n'.repeat(8000)}MARKER\n`;
  const goalId = await goalWith({ 'big.txt': big });
  const before = (await t.rt.vfs.stat(goalId, 'big.txt'))!;
  assert.ok(before.blobRef, 'spilled');
  const { edit_file } = toolsOf(goalId);
  await edit_file!.run({ name: 'big.txt', old_string: 'MARKER', new_string: 'EDITED' });
  const after = (await t.rt.vfs.stat(goalId, 'big.txt'))!;
  assert.equal(after.version, 2);
  assert.ok(after.blobRef && after.blobRef !== before.blobRef);
  assert.equal(await t.rt.vfs.read(goalId, 'big.txt'), big.replace('MARKER', 'EDITED'));
  assert.ok(!existsSync(join(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix, before.blobRef!)), 'the old blob is gone');
});

test('edit_file and delete_file refuse a rewrite that landed after their read, by the same writer too', async () => {
  const goalId = await goalWith({ 'notes.md': 'line1 from A\n' });
  // The other job rewrites its file (in place, same version) right after this edit read it.
  let rewrites = 0;
  const racing = new Proxy(t.rt.vfs, {
    get(target, prop, receiver) {
      if (prop !== 'read') return Reflect.get(target, prop, receiver);
      return async (g: string, name: string) => {
        const text = await target.read(g, name);
        if (rewrites++ === 0) await target.write(g, name, `${text}IMPORTANT line2 from A\n`, seed);
        return text;
      };
    },
  });
  const scope = { goalId, step: STEP, role: 'code-writer', threadId: `goal-${goalId}--code-writer-1`, writer: 'job-1' };
  const tools = Object.fromEntries(createVfsTools(racing, scope, [...TOOL_NAMES]).map((x) => [x.def.name, x]));
  await assert.rejects(
    tools.edit_file!.run({ name: 'notes.md', old_string: 'line1', new_string: 'LINE1' }),
    /notes\.md changed while it was being edited .*nothing was changed: read it and retry/,
  );
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'line1 from A\nIMPORTANT line2 from A\n');
  assert.match(await tools.edit_file!.run({ name: 'notes.md', old_string: 'line1', new_string: 'LINE1' }), /edited/);
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'LINE1 from A\nIMPORTANT line2 from A\n');
});

test("edit_file refuses a result over the artifact limit before building it, with the write's message", async () => {
  // 1 MB of "a"; each "a" becoming 10 "€" (30 bytes) would make 30 MB, and a longer new_string gigabytes.
  const goalId = await goalWith({ 'big.txt': 'a'.repeat(1_000_000), 'two.txt': 'MARK\nMARK\n' });
  const { edit_file } = toolsOf(goalId);
  const max = t.rt.vfs.opts.maxArtifactBytes;
  const vfs = t.rt.vfs;
  const write = vfs.write;
  let writes = 0;
  vfs.write = (...args) => {
    writes++;
    return write.apply(vfs, args);
  };
  try {
    const growth = 29;
    const overAt = Math.floor((max - 1_000_000) / growth) + 1;
    // Counting stops at the occurrence that takes it over: "at least", and no string of 30 MB is made.
    await assert.rejects(
      edit_file!.run({ name: 'big.txt', old_string: 'a', new_string: '€'.repeat(10), replace_all: true }),
      { message: `artifact big.txt is at least ${1_000_000 + overAt * growth} bytes (max ${max})` },
    );
    // Counted to the end: exactly the write's message. One replacement fits, two do not.
    const huge = 'x'.repeat(3_000_000);
    await assert.rejects(edit_file!.run({ name: 'two.txt', old_string: 'MARK', new_string: huge, replace_all: true }), {
      message: `artifact two.txt is ${10 + 2 * (3_000_000 - 4)} bytes (max ${max})`,
    });
    assert.equal(writes, 0, 'refused before any write was tried');
    assert.equal((await vfs.stat(goalId, 'big.txt'))!.version, 1, 'no new version');
    assert.match(await edit_file!.run({ name: 'two.txt', old_string: 'MARK\nMARK', new_string: huge }), /replaced 1 /);
  } finally {
    vfs.write = write;
  }
});

// ---- grep --------------------------------------------------------------------------------

test('grep: file:line: text for each matching line, in name order, with ignore_case and a glob', async () => {
  const goalId = await goalWith({
    'src/b.py': 'import os\n# TODO: tidy\nprint(1)\n',
    'src/a.py': 'x = 1\r\n# todo later\r\n',
    'notes.md': 'TODO: write docs\n',
  });
  const { grep } = toolsOf(goalId);
  assert.equal(
    await grep!.run({ pattern: 'TODO' }),
    '[2 matches in 3 file(s)]\nnotes.md:1: TODO: write docs\nsrc/b.py:2: # TODO: tidy',
  );
  assert.equal(
    await grep!.run({ pattern: 'todo', ignore_case: true, glob: 'src/**/*.py' }),
    '[2 matches in 2 file(s) matching "src/**/*.py"]\nsrc/a.py:2: # todo later\nsrc/b.py:2: # TODO: tidy',
  );
  assert.equal(await grep!.run({ pattern: '^print\\(\\d\\)$' }), '[1 match in 3 file(s)]\nsrc/b.py:3: print(1)');
  assert.equal(await grep!.run({ pattern: 'nothing-here' }), '[no matches for /nothing-here/ in 3 file(s)]');
  assert.equal(await grep!.run({ pattern: 'x', glob: '*.txt' }), '[no matches for /x/ in 0 file(s) matching "*.txt"]');
});

test('grep is bounded: at most 200 matches, lines cut at 300 chars, and it says so', async () => {
  const many = Array.from({ length: 500 }, (_, i) => `match ${i}`).join('\n');
  const long = `short match\n${'m'.repeat(1000)} match at the end\n`;
  const goalId = await goalWith({ 'many.txt': many, 'long.txt': long });
  const { grep } = toolsOf(goalId);
  assert.equal(GREP_LIMITS.maxMatches, 200);
  assert.equal(GREP_LIMITS.lineMaxChars, 300);

  const capped = (await grep!.run({ pattern: 'match \\d+', glob: 'many.txt' })).split('\n');
  assert.equal(
    capped[0],
    '[200 matches shown in 1 file(s) matching "many.txt"; stopped at 200 matches, there are more: ' +
      'narrow the pattern or the glob]',
  );
  assert.equal(capped.length, 201);
  assert.equal(capped[200], 'many.txt:200: match 199');

  const cut = (await grep!.run({ pattern: 'match', glob: 'long.txt' })).split('\n');
  assert.equal(cut[0], '[2 matches in 1 file(s) matching "long.txt"; lines cut at 300 chars]');
  assert.equal(cut[1], 'long.txt:1: short match');
  assert.equal(cut[2], `long.txt:2: ${'m'.repeat(300)}…`);
});

test('grep: a bad regex, a bad glob and bad arguments are clear errors', async () => {
  const goalId = await goalWith({ 'a.txt': 'a\n' });
  const { grep } = toolsOf(goalId);
  await assert.rejects(grep!.run({ pattern: '(' }), /^Error: bad regex "\(": Invalid regular expression: \/\(\/: /);
  await assert.rejects(grep!.run({ pattern: '[a-' }), /bad regex "\[a-"/);
  await assert.rejects(grep!.run({ pattern: 'a', glob: 'src/{a' }), /glob has a "\{" at 5 without its "\}"/);
  await assert.rejects(grep!.run({ pattern: '' }), /bad arguments for grep: pattern: pattern must not be empty/);
  await assert.rejects(grep!.run({ pattern: 'a', ignore_case: 'yes' }), /bad arguments for grep: ignore_case:/);
  await assert.rejects(grep!.run({ regex: 'a' }), /bad arguments for grep: pattern: .*Unrecognized key: "regex"/);
});

test('grep: a catastrophic regex is stopped by the time budget, and the worker goes on', async () => {
  const goalId = await goalWith({ 'evil.txt': `${'a'.repeat(40)}!\n` });
  const { grep } = toolsOf(goalId, { grep: { timeBudgetMs: 200 } });
  const started = performance.now();
  await assert.rejects(
    grep!.run({ pattern: '(a+)+$' }),
    /^Error: the pattern took longer than 200 ms and was stopped \(catastrophic backtracking\?\)/,
  );
  const ms = performance.now() - started;
  assert.ok(ms < 2000, `${ms} ms`);
  // The same tool answers the next call normally.
  assert.equal(await grep!.run({ pattern: '!$' }), `[1 match in 1 file(s)]\nevil.txt:1: ${'a'.repeat(40)}!`);
});

test('grep scans at most scanMaxChars: a file past it is searched in part, the rest are named', async () => {
  const goalId = await goalWith({
    'a.txt': `${'a\n'.repeat(300)}needle a\n`, // 609 chars
    'b.txt': `needle b\n${'b\n'.repeat(300)}needle b2\n`,
    'c.txt': 'needle c\n',
  });
  const { grep } = toolsOf(goalId, { grep: { scanMaxChars: 1000 } });
  assert.equal(
    await grep!.run({ pattern: 'needle' }),
    '[2 matches in 2 file(s); scan limit of 1000 chars reached: b.txt searched in part, 1 file(s) not searched; ' +
      'narrow with glob]\na.txt:301: needle a\nb.txt:1: needle b',
  );
  assert.equal(
    await grep!.run({ pattern: 'needle', glob: 'c.txt' }),
    '[1 match in 1 file(s) matching "c.txt"]\nc.txt:1: needle c',
  );
});

test('grep searches spilled artifacts, and never deleted or evicted ones', async () => {
  const big = `${'filler\n'.repeat(20_000)}the needle\n`;
  const goalId = await goalWith({ 'big.log': big, 'gone.txt': 'the needle too\n' });
  assert.ok((await t.rt.vfs.stat(goalId, 'big.log'))!.blobRef, 'spilled');
  const { grep, delete_file } = toolsOf(goalId);
  assert.equal(
    await grep!.run({ pattern: 'needle' }),
    '[2 matches in 2 file(s)]\nbig.log:20001: the needle\ngone.txt:1: the needle too',
  );
  await delete_file!.run({ name: 'gone.txt' });
  assert.equal(await grep!.run({ pattern: 'needle' }), '[1 match in 1 file(s)]\nbig.log:20001: the needle');
});

test('delete_file refuses the subtask artifact: a failed revision that deleted it lost the done one', async () => {
  const goalId = await goalWith({ 'notes.md': 'the done version\n', 'scratch.md': 'x' });
  const scope = { goalId, step: STEP, role: 'code-writer', threadId: `goal-${goalId}--code-writer-1`, writer: 'job-1' };
  const tools = Object.fromEntries(
    createVfsTools(t.rt.vfs, { ...scope, artifact: 'notes.md' }, [...TOOL_NAMES]).map((x) => [x.def.name, x]),
  );
  await assert.rejects(
    tools.delete_file!.run({ name: 'notes.md' }),
    /notes\.md is the artifact this subtask must write/,
  );
  assert.equal(await t.rt.vfs.read(goalId, 'notes.md'), 'the done version\n');
  assert.equal(await tools.delete_file!.run({ name: 'scratch.md' }), 'deleted scratch.md');
});

// ---- list_files --------------------------------------------------------------------------

test('list_files lists the index; a glob keeps the names it matches', async () => {
  const goalId = await goalWith({
    'src/a.py': 'a',
    'src/x/b.py': 'bb',
    'docs/c.md': 'ccc',
    'top.py': 'dddd',
  });
  const { list_files, delete_file } = toolsOf(goalId);
  assert.equal(await list_files!.run({}), formatIndex(await t.rt.vfs.index(goalId)));
  assert.equal(
    await list_files!.run({ glob: 'src/**/*.py' }),
    '- src/a.py [active, 1 bytes]\n- src/x/b.py [active, 2 bytes]',
  );
  assert.equal(await list_files!.run({ glob: '*.py' }), '- top.py [active, 4 bytes]');
  assert.equal(await list_files!.run({ glob: '**/*.{md,py}' }), formatIndex(await t.rt.vfs.index(goalId)));
  assert.equal(await list_files!.run({ glob: '*.rs' }), '(no files match "*.rs")');
  await delete_file!.run({ name: 'top.py' });
  assert.equal(await list_files!.run({ glob: '*.py' }), '- top.py [evicted]');
  await assert.rejects(list_files!.run({ glob: '[ab' }), /glob has a "\[" at 1 without its "\]"/);
  await assert.rejects(list_files!.run({ glob: '' }), /bad arguments for list_files: glob: glob must not be empty/);
  await assert.rejects(list_files!.run({ pattern: '*' }), /Unrecognized key: "pattern"/);
});

// ---- finished work -----------------------------------------------------------------------

test("a done artifact is changed by its own subtask's revision only: old version kept; others refused", async () => {
  const goalId = await t.newGoal();
  const done = { ...seed, status: 'done' as const };
  for (const name of ['facts.md', 'solution.py']) await t.rt.vfs.write(goalId, name, `${name} v1`, done);
  const scope = { goalId, step: STEP, role: 'code-writer', threadId: 'goal-x--code-writer-1', writer: 'job-1' };
  const tools = createVfsTools(t.rt.vfs, { ...scope, artifact: 'solution.py' }, [...TOOL_NAMES]);
  const { write_file, edit_file, delete_file } = Object.fromEntries(tools.map((x) => [x.def.name, x]));
  const refused = /facts\.md is done \(finished at step 1\); only a subtask planned to revise it may change it/;
  await assert.rejects(write_file!.run({ name: 'facts.md', content: 'overwritten' }), refused);
  await assert.rejects(edit_file!.run({ name: 'facts.md', old_string: 'v1', new_string: 'v2' }), refused);
  await assert.rejects(delete_file!.run({ name: 'facts.md' }), refused);
  assert.equal(await t.rt.vfs.read(goalId, 'facts.md'), 'facts.md v1');
  assert.deepEqual(
    [(await t.rt.vfs.stat(goalId, 'facts.md'))!.version, (await t.rt.vfs.history(goalId, 'facts.md')).length],
    [1, 0],
  );
  // Its own artifact: a new version, and v1 stays in the history (a later final write is the same version).
  assert.match(await write_file!.run({ name: 'solution.py', content: 'solution.py v2' }), /version 2\)$/);
  const history = await t.rt.vfs.history(goalId, 'solution.py');
  assert.deepEqual(
    history.map((h) => [h.version, h.status, h.content]),
    [[1, 'done', 'solution.py v1']],
  );
});

// ---- delete_file -------------------------------------------------------------------------

test('delete_file leaves a tombstone: the name reads as absent, shows as gone, and can be written again', async () => {
  const big = 'z'.repeat(150_000);
  const goalId = await goalWith({ 'draft.md': 'draft v1', 'big.bin': big });
  const blobRef = (await t.rt.vfs.stat(goalId, 'big.bin'))!.blobRef!;
  assert.ok(existsSync(join(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix, blobRef)));
  const { delete_file, read_file, write_file, list_files } = toolsOf(goalId);

  assert.equal(await delete_file!.run({ name: 'draft.md' }), 'deleted draft.md');
  const tomb = (await t.rt.vfs.stat(goalId, 'draft.md'))!;
  assert.deepEqual([tomb.status, tomb.version, tomb.step, tomb.bytes], ['evicted', 2, STEP, 0]);
  assert.equal(await t.rt.vfs.read(goalId, 'draft.md'), null);
  await assert.rejects(
    read_file!.run({ name: 'draft.md' }),
    /^Error: no such file: draft\.md \(it was deleted or evicted\)/,
  );
  await assert.rejects(read_file!.run({ name: 'draft.md', offset: 0 }), /no such file: draft\.md/);
  // The planner's index shows the name as gone; the live lists leave it out.
  assert.match(formatIndex(await t.rt.vfs.index(goalId)), /^- draft\.md \[evicted\]$/m);
  assert.match(await list_files!.run({}), /^- draft\.md \[evicted\]$/m);
  // A spilled file's blob goes with it.
  await delete_file!.run({ name: 'big.bin' });
  assert.ok(!existsSync(join(t.rt.cfg.vfs.blobDir, t.rt.cfg.prefix, blobRef)), 'the blob is removed');
  // Deleting what is not there is an error, and changes nothing.
  await assert.rejects(delete_file!.run({ name: 'draft.md' }), /no such file: draft\.md \(it was deleted or evicted\)/);
  await assert.rejects(delete_file!.run({ name: 'never.md' }), /^Error: no such file: never\.md$/);
  await assert.rejects(delete_file!.run({ name: '/etc/passwd' }), /starts with "\/"/);
  assert.equal((await t.rt.vfs.stat(goalId, 'draft.md'))!.version, 2);

  // Written again: a live file with the next version.
  assert.equal(await write_file!.run({ name: 'draft.md', content: 'draft v2' }), 'wrote draft.md (8 bytes, version 3)');
  assert.equal(await read_file!.run({ name: 'draft.md' }), 'draft v2');
  assert.equal((await t.rt.vfs.stat(goalId, 'draft.md'))!.status, 'active');
});

test("a deleted file's tombstone leaves the index at the next cycle's eviction, like an evicted one", async () => {
  const goalId = await goalWith({ 'old.md': 'x', 'keep.md': 'y' });
  await toolsOf(goalId).delete_file!.run({ name: 'old.md' });
  await t.rt.vfs.evict(goalId, STEP);
  assert.equal((await t.rt.vfs.stat(goalId, 'old.md'))?.status, 'evicted', 'kept through its own cycle');
  await t.rt.vfs.evict(goalId, STEP + 1);
  assert.equal(await t.rt.vfs.stat(goalId, 'old.md'), null, 'dropped one cycle later');
  assert.deepEqual(
    (await t.rt.vfs.index(goalId)).map((e) => e.name),
    ['keep.md'],
  );
});

/** Runs `fn` with the tools of a new goal on a runtime whose goals hold at most 2 files. */
async function withTwoFiles(fn: (tools: Record<string, Tool>, goalId: string, small: VfsTestRuntime) => Promise<void>) {
  const small = vfsRuntime(redis.url, { DEEPQ_MAX_FILES_PER_GOAL: '2' });
  try {
    const goalId = await small.newGoal();
    const scope = { goalId, step: 1, role: 'code-writer', threadId: 'th', writer: 'w' };
    const tools = Object.fromEntries(createVfsTools(small.rt.vfs, scope, [...TOOL_NAMES]).map((x) => [x.def.name, x]));
    await fn(tools, goalId, small);
  } finally {
    await small.close();
  }
}

test('a deleted file frees its place under the per-goal file limit', async () => {
  await withTwoFiles(async (tools) => {
    await tools.write_file!.run({ name: 'a.md', content: 'a' });
    await tools.write_file!.run({ name: 'b.md', content: 'b' });
    await assert.rejects(tools.write_file!.run({ name: 'c.md', content: 'c' }), /already has 2 files \(max 2\)/);
    await tools.delete_file!.run({ name: 'a.md' });
    assert.match(await tools.write_file!.run({ name: 'c.md', content: 'c' }), /wrote c\.md/);
  });
});

test('deleted names are bounded too: no more of them than the file limit, until an eviction drops them', async () => {
  await withTwoFiles(async (tools, goalId, small) => {
    for (const name of ['a.md', 'b.md', 'c.md', 'd.md']) {
      await tools.write_file!.run({ name, content: 'x' });
      await tools.delete_file!.run({ name });
    }
    await assert.rejects(
      tools.write_file!.run({ name: 'e.md', content: 'x' }),
      /has 4 deleted names not yet dropped \(they go at the next cycle\)/,
    );
    assert.match(await tools.write_file!.run({ name: 'a.md', content: 'again' }), /wrote a\.md/);
    assert.equal((await small.rt.vfs.index(goalId)).length, 4);
    // The next cycle's eviction drops them, even before any entry is old enough to be evicted.
    const index = await redis.client.hgetall(small.rt.goals.keys.files(goalId));
    assert.equal(small.rt.vfs.evictionIsIdle(2, Object.entries(index).flat()), false);
    await small.rt.vfs.evict(goalId, 2, Object.entries(index).flat());
    assert.deepEqual(
      (await small.rt.vfs.index(goalId)).map((e) => e.name),
      ['a.md'],
    );
    const after = Object.entries(await redis.client.hgetall(small.rt.goals.keys.files(goalId))).flat();
    assert.equal(small.rt.vfs.evictionIsIdle(2, after), true, 'nothing left to drop: no round trip');
  });
});

// ---- read_file ---------------------------------------------------------------------------

test('read_file keeps offset and limit; write_file creates and replaces', async () => {
  const goalId = await goalWith({ 'r.txt': 'l0\nl1\nl2\nl3\n' });
  const { read_file, write_file } = toolsOf(goalId);
  assert.equal(
    await read_file!.run({ name: 'r.txt', offset: 1, limit: 2 }),
    '[r.txt: lines 2-3 of 4; next page: offset 3]\nl1\nl2',
  );
  assert.equal(await read_file!.run({ name: 'r.txt' }), 'l0\nl1\nl2\nl3\n');
  assert.equal(await write_file!.run({ name: 'r.txt', content: 'new' }), 'wrote r.txt (3 bytes, version 2)');
  assert.equal(
    await write_file!.run({ name: 'r.txt', content: 'newer' }),
    'wrote r.txt (5 bytes, version 2)',
    'same writer: in place',
  );
  await assert.rejects(
    read_file!.run({ name: 'r.txt', offset: -1 }),
    /bad arguments for read_file: offset: offset must be 0 or more/,
  );
});

test("once another delivery holds the job's lock, write_file and run_code's save throw (the run counted)", async () => {
  const goalId = await t.newGoal();
  const key = `${t.rt.cfg.prefix}:sub-code-writer:${goalId}:1:0:lock`;
  await redis.client.set(key, 'another-worker:7');
  const scope = {
    goalId,
    step: STEP,
    role: 'code-writer',
    threadId: 'th',
    writer: 'job-1',
    lock: { key, token: 'me:1' },
  };
  const [write] = createVfsTools(t.rt.vfs, scope, ['write_file']);
  await assert.rejects(write!.run({ name: 'a.txt', content: 'x' }), LockLostError);
  const limits = SandboxSchema.parse({ mode: 'none' });
  const metrics = new Metrics();
  const [run] = createSandboxTools({ vfs: t.rt.vfs, limits, metrics }, scope, ['run_code']);
  await assert.rejects(run!.run({ language: 'shell', code: 'echo hi > out.txt', save: ['out.txt'] }), LockLostError);
  assert.equal(await t.rt.vfs.stat(goalId, 'out.txt'), null);
  // The run happened: it is counted once, though its save was refused.
  const runs = (await metrics.sandboxRuns.get()).values;
  assert.deepEqual(
    runs.map((v) => [v.labels.outcome, v.value]),
    [['ok', 1]],
  );
  assert.equal(await t.rt.vfs.stat(goalId, 'a.txt'), null);
});
