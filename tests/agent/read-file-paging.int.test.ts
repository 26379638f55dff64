// read_file pages through an artifact by line (offset: 0-based first line, limit: lines),
// so an artifact bigger than any message (a spilled blob over the task budget) can still be
// read whole by a later subtask, a page at a time; bad offsets and limits are refused clearly.
// Real VirtualFs on a private Redis, real blob store.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createVfsTools, READ_PAGE_MAX_CHARS, splitLines, type Tool } from '../../shared/agent/tools.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const meta = { status: 'done' as const, step: 1, role: 'research-specialist', writer: 'seed' };

/** `n` numbered lines of varied length (some empty, some with multibyte and astral chars). */
function numbered(tag: string, n: number, width = 40): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 97 === 13) out.push('');
    else out.push(`${tag} line ${i}: ${'ünï 😀 abc '.repeat(1 + ((i * 7919) % width) / 10)}`);
  }
  return `${out.join('\n')}\n`;
}

function readTool(goalId: string): Tool {
  const tools = createVfsTools(t.rt.vfs, { goalId, step: 2, role: 'critic', threadId: 'th', writer: 'w' }, [
    'read_file',
  ]);
  return tools[0]!;
}

const HEADER = /^\[(\S+): lines (\d+)-(\d+) of (\d+); ([^\n]*)\]\n/;

/** Follows the pages from `offset` to the end of the file, checking each header; returns every line read. */
async function readAllPages(tool: Tool, name: string, offset: number, limit?: number): Promise<string[]> {
  const got: string[] = [];
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 10_000, 'paging never ended');
    const page = await tool.run({ name, offset, ...(limit === undefined ? {} : { limit }) });
    const h = HEADER.exec(page);
    assert.ok(h, `page without a header: ${page.slice(0, 120)}`);
    assert.equal(h[1], name);
    assert.equal(Number(h[2]), offset + 1, 'the header names the first line, 1-based');
    const body = page.slice(h[0].length).split('\n');
    assert.equal(body.length, Number(h[3]) - Number(h[2]) + 1, 'the header counts the lines returned');
    if (limit !== undefined) assert.ok(body.length <= limit);
    assert.ok(page.length <= READ_PAGE_MAX_CHARS + h[0].length, 'a page stays under the page limit');
    got.push(...body);
    const next = /next page: offset (\d+)/.exec(h[5]!);
    if (!next) {
      assert.match(h[5]!, /end of file/);
      assert.equal(Number(h[3]), Number(h[4]));
      return got;
    }
    assert.equal(Number(next[1]), Number(h[3]), 'the next offset follows the last line shown');
    offset = Number(next[1]);
  }
}

test('a spilled artifact far bigger than the task budget is read whole, page by page, with offset/limit', async () => {
  const goalId = await t.newGoal();
  const content = numbered('report', 5000);
  assert.ok(content.length > t.rt.cfg.vfs.taskMaxChars, `${content.length} chars`);
  const e = await t.rt.vfs.write(goalId, 'report.md', content, meta);
  assert.ok(e.blobRef, 'the artifact spilled to the blob store');
  const tool = readTool(goalId);
  const lines = splitLines(content);
  assert.equal(lines.length, 5000);

  const first = await tool.run({ name: 'report.md', offset: 100, limit: 100 });
  assert.ok(first.startsWith('[report.md: lines 101-200 of 5000; next page: offset 200]\n'), first.slice(0, 100));
  assert.equal(first.split('\n').slice(1).join('\n'), lines.slice(100, 200).join('\n'));

  // Every line is reachable, in pages of 100 lines and in pages as big as the page limit allows.
  assert.deepEqual(await readAllPages(tool, 'report.md', 0, 100), lines);
  assert.deepEqual(await readAllPages(tool, 'report.md', 0, 5000), lines);
  assert.deepEqual(await readAllPages(tool, 'report.md', 0), lines, 'offset alone: from there on');
  assert.deepEqual(await readAllPages(tool, 'report.md', 4321, 7), lines.slice(4321));

  const big = await tool.run({ name: 'report.md', limit: 5000 });
  assert.match(big, /^\[report\.md: lines 1-\d+ of 5000; page cut to 40000 chars: \d+ of the 5000 lines asked for; /);
  const last = await tool.run({ name: 'report.md', offset: 4999, limit: 10 });
  assert.equal(last, `[report.md: lines 5000-5000 of 5000; end of file]\n${lines[4999]}`);
  // Without offset and limit, read_file is unchanged: the whole content.
  assert.equal(await tool.run({ name: 'report.md' }), content);
});

test('a line longer than a page is read in parts with char_offset, and paging goes on past it', async () => {
  const goalId = await t.newGoal();
  // A one-line JSON or minified file: every char of it can be read, a page at a time.
  const long = `${'x'.repeat(READ_PAGE_MAX_CHARS)}${'y'.repeat(4999)}z`;
  await t.rt.vfs.write(goalId, 'wide.txt', `head\n${long}\ntail\n`, meta);
  const tool = readTool(goalId);
  const page = await tool.run({ name: 'wide.txt', offset: 1, limit: 2 });
  const first = `line 2 of 3, chars 1-${READ_PAGE_MAX_CHARS} of ${long.length}`;
  const next = `next page: offset 1 char_offset ${READ_PAGE_MAX_CHARS}`;
  assert.equal(page, `[wide.txt: ${first}; ${next}]\n${long.slice(0, READ_PAGE_MAX_CHARS)}`);
  const rest = await tool.run({ name: 'wide.txt', offset: 1, char_offset: READ_PAGE_MAX_CHARS });
  const where = `line 2 of 3, chars ${READ_PAGE_MAX_CHARS + 1}-${long.length} of ${long.length}`;
  assert.equal(rest, `[wide.txt: ${where}; next page: offset 2]\n${'y'.repeat(4999)}z`);
  assert.equal(await tool.run({ name: 'wide.txt', offset: 2 }), '[wide.txt: lines 3-3 of 3; end of file]\ntail');
  await assert.rejects(
    tool.run({ name: 'wide.txt', offset: 0, char_offset: 4 }),
    /char_offset 4 is past the end of line 1 of wide\.txt: it has 4 chars/,
  );
});

test('bad offsets and limits are refused with a clear error', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'report.md', numbered('r', 50), meta);
  await t.rt.vfs.write(goalId, 'empty.md', '', meta);
  const tool = readTool(goalId);
  const refused = async (input: unknown, re: RegExp) => assert.rejects(tool.run(input), re, JSON.stringify(input));
  await refused({ name: 'report.md', offset: -1 }, /bad arguments for read_file: offset: offset must be 0 or more/);
  await refused({ name: 'report.md', offset: 1.5 }, /bad arguments for read_file: offset: .*int/i);
  await refused({ name: 'report.md', offset: '10' }, /bad arguments for read_file: offset: .*number/i);
  await refused({ name: 'report.md', limit: 0 }, /bad arguments for read_file: limit: limit must be 1 or more/);
  await refused({ name: 'report.md', limit: -20 }, /limit: limit must be 1 or more/);
  await refused({ name: 'report.md', limit: 2.5 }, /bad arguments for read_file: limit: .*int/i);
  await refused({ name: 'report.md', offset: 0, lines: 5 }, /bad arguments for read_file: .*lines/);
  await refused({ name: 'report.md', offset: 50 }, /^Error: offset 50 is past the end of report\.md: it has 50 lines/);
  await refused({ name: 'report.md', offset: 1e9, limit: 1 }, /offset 1000000000 is past the end.*offset must be 0-49/);
  await refused({ name: 'empty.md', offset: 1 }, /offset 1 is past the end of empty\.md: it is empty/);
  await refused({ name: 'nope.md', offset: 0 }, /no such file: nope\.md/);
  assert.equal(await tool.run({ name: 'empty.md', offset: 0, limit: 5 }), '[empty.md: empty, 0 lines]');
  assert.equal(await tool.run({ name: 'empty.md' }), '');
});

test("read_file's definition offers offset and limit, as integers, and says how to page", () => {
  const def = readTool('g').def;
  assert.deepEqual(def.input_schema.required, ['name']);
  const props = def.input_schema.properties as Record<string, { type: string; minimum?: number }>;
  assert.equal(props.offset!.type, 'integer');
  assert.equal(props.offset!.minimum, 0);
  assert.equal(props.limit!.type, 'integer');
  assert.equal(props.limit!.minimum, 1);
  assert.equal(def.input_schema.additionalProperties, false);
  assert.match(def.description ?? '', /offset.*0-based.*limit/s);
});
