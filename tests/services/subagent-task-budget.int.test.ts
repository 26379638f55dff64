// The subagent's task message obeys cfg.vfs.taskMaxChars, however big its read_files: the
// instruction in full, the files in order while they fit, the first that does not fit cut at
// a line boundary with a marker, the rest named only; every marker gives the file's size and
// the read_file offset/limit to read on. End to end, a subagent worker's model gets a task
// within the budget and reads every line of the cut and left-out files through read_file.
// Real VirtualFs, blob store and private Redis; the real AnthropicProvider against a local
// Messages-API server for the worker.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { Job, Queue } from 'bullmq';
import { processSubagentJob } from '../../services/subagent-worker/subagent-job.ts';
import { buildSubagentTask } from '../../services/subagent-worker/task.ts';
import { createVfsTools, splitLines, type Tool } from '../../shared/agent/tools.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { testRuntime } from '../../testing/agent-harness.ts';
import {
  firstUserText,
  type MessagesApiServer,
  type MessagesBody,
  startMessagesApiServer,
  text,
  toolUse,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { prng } from '../../testing/prng.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

const meta = { status: 'done' as const, step: 1, role: 'research-specialist', writer: 'seed' };
const MARKER_ARGS = /\{"name":"([^"]+)","offset":(\d+),"limit":(\d+)\}/;

/** `n` numbered lines of varied length, some with multibyte and astral chars. */
function numbered(tag: string, n: number, width = 60): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(`${tag} ${i}: ${'abc ünï 😀 '.repeat(1 + ((i * 7919) % width) / 10)}`);
  return `${out.join('\n')}\n`;
}

/** An instruction as long as the plan schema allows (20,000 chars), over several lines. */
const LONG_INSTRUCTION = `Review the data below and summarise it.\n${'Check every row carefully. '.repeat(800)}`.slice(
  0,
  20_000,
);

function job(goalId: string, read_files: string[], instruction = LONG_INSTRUCTION): SubagentJob {
  return {
    goalId,
    step: 2,
    index: 0,
    role: 'research-specialist',
    instruction,
    expected_artifact: 'out.md',
    read_files,
  };
}

function readTool(goalId: string): Tool {
  const scope = { goalId, step: 2, role: 'research-specialist', threadId: 'th', writer: 'w' };
  return createVfsTools(t.rt.vfs, scope, ['read_file'])[0]!;
}

/** The part of the task under `# name` (up to the next file's header or the task). */
function section(task: string, name: string, next: string): string {
  const start = task.indexOf(`# ${name}\n`);
  assert.ok(start >= 0, `${name} is not named in the task`);
  const end = task.indexOf(`\n\n${next}`, start);
  assert.ok(end > start, `no ${next} after ${name}`);
  return task.slice(start + name.length + 3, end);
}

/** Every line from `offset` on, following read_file's "next page: offset N" to the end. */
async function pagesFrom(tool: Tool, name: string, offset: number, limit: number): Promise<string[]> {
  const got: string[] = [];
  for (;;) {
    const page = await tool.run({ name, offset, limit });
    const h = /^\[[^\]\n]*: lines (\d+)-(\d+) of \d+; ([^\n]*)\]\n/.exec(page);
    assert.ok(h, page.slice(0, 200));
    assert.equal(Number(h[1]), offset + 1);
    got.push(...page.slice(h[0].length).split('\n'));
    const next = /next page: offset (\d+)/.exec(h[3]!);
    if (!next) return got;
    offset = Number(next[1]);
  }
}

test('read_files far over taskMaxChars: the task fits, the instruction whole, the files in order', async () => {
  const budget = t.rt.cfg.vfs.taskMaxChars;
  assert.equal(budget, 200_000, 'the default budget');
  const goalId = await t.newGoal();
  const notes = numbered('note', 400);
  const data = numbered('row', 12_000);
  const log = numbered('log', 6000);
  const small = 'a small file\n';
  for (const [name, c] of [
    ['notes.md', notes],
    ['data.csv', data],
    ['big.log', log],
    ['small.md', small],
  ] as const)
    await t.rt.vfs.write(goalId, name, c, meta);
  assert.ok((await t.rt.vfs.stat(goalId, 'data.csv'))!.blobRef, 'data.csv spilled to the blob store');
  assert.ok(notes.length < 50_000 && data.length > budget && log.length > budget);

  const task = await buildSubagentTask(t.rt, job(goalId, ['notes.md', 'data.csv', 'gone.md', 'big.log', 'small.md']));
  assert.ok(task.length <= budget, `${task.length} chars`);
  assert.ok(task.length > budget - 1000, 'the budget is used, not wasted');
  assert.ok(task.endsWith(`\n\n## Task\n${LONG_INSTRUCTION}`), 'the instruction, whole, at the end');
  assert.ok(task.startsWith(`# notes.md\n${notes}\n\n# data.csv\n`), 'the first file in full');

  // data.csv: whole lines, then a marker with its size and where to read on.
  const cut = section(task, 'data.csv', '# gone.md');
  const at = cut.indexOf('[deepq: data.csv is cut here');
  assert.ok(at > 0, cut.slice(-500));
  const shown = cut.slice(0, at);
  const marker = cut.slice(at);
  const lines = splitLines(data);
  const shownLines = splitLines(shown);
  assert.ok(shown.endsWith('\n') && shownLines.length > 100);
  assert.deepEqual(shownLines, lines.slice(0, shownLines.length), 'a clean cut at a line boundary');
  assert.match(marker, new RegExp(`It has ${lines.length} lines \\(${data.length} chars\\)`));
  assert.match(marker, new RegExp(`lines 1-${shownLines.length} are shown above`));
  assert.match(marker, /read_file tool/);
  const args = MARKER_ARGS.exec(marker)!;
  assert.deepEqual([args[1], Number(args[2])], ['data.csv', shownLines.length]);
  // Reading on from the marker reaches every remaining line.
  const rest = await pagesFrom(readTool(goalId), 'data.csv', Number(args[2]), Number(args[3]));
  assert.deepEqual([...shownLines, ...rest], lines);

  assert.equal(section(task, 'gone.md', '# big.log'), '(not available: the file was evicted or never written)');
  // The files after the budget is spent: named, with size and how to read them.
  for (const [name, content, next] of [
    ['big.log', log, '# small.md'],
    ['small.md', small, '## Task'],
  ] as const) {
    const s = section(task, name, next);
    assert.match(s, new RegExp(`^\\[deepq: ${name.replace('.', '\\.')} is not included: the task reached its`));
    assert.match(s, new RegExp(`It has ${splitLines(content).length} lines \\(${content.length} chars\\)`));
    assert.ok(!s.includes(content.slice(0, 12)), `${name}'s content leaked in`);
    const a = MARKER_ARGS.exec(s)!;
    assert.deepEqual([a[1], a[2]], [name, '0']);
    assert.deepEqual(await pagesFrom(readTool(goalId), name, 0, Number(a[3])), splitLines(content));
  }
});

test('twenty read_files of nearly 5 MB each: one bounded task naming all twenty, in order', async () => {
  const goalId = await t.newGoal();
  const names = Array.from({ length: 20 }, (_, i) => `part-${String(i).padStart(2, '0')}.csv`);
  const row = (i: number) => `${i},${'y'.repeat(90)}`;
  const content = `${Array.from({ length: 50_000 }, (_, i) => row(i)).join('\n')}\n`;
  assert.ok(content.length > 4.5 * 1024 * 1024 && content.length <= t.rt.cfg.vfs.maxArtifactBytes);
  for (const n of names) await t.rt.vfs.write(goalId, n, content, meta);
  const task = await buildSubagentTask(t.rt, job(goalId, names));
  assert.ok(task.length <= t.rt.cfg.vfs.taskMaxChars, `${task.length} chars`);
  assert.ok(task.endsWith(`## Task\n${LONG_INSTRUCTION}`));
  const headers = [...task.matchAll(/^# (part-\d\d\.csv)$/gm)].map((m) => m[1]);
  assert.deepEqual(headers, names, 'each file once, in order');
  assert.match(section(task, names[0]!, `# ${names[1]}`), /\[deepq: part-00\.csv is cut here/);
  for (const [i, n] of names.slice(1).entries()) {
    const s = section(task, n, i + 2 < names.length ? `# ${names[i + 2]}` : '## Task');
    assert.match(s, /is not included: .* It has 50000 lines \(\d+ chars\)\. Read it with the read_file tool/);
  }
});

test('any budget and any mix of files: never over the budget, each file whole, cut, named or missing', async () => {
  const goalId = await t.newGoal();
  const rnd = prng(20_240_917);
  const files: Record<string, string> = {};
  for (let i = 0; i < 12; i++) {
    const kind = i % 4;
    const name = `f${i}-${'n'.repeat(Math.floor(rnd() * 60))}.txt`;
    // Many short lines, one huge line (no newline at all), a tiny file, a medium file.
    const body = [
      () => numbered(`f${i}`, 50 + Math.floor(rnd() * 3000)),
      () => '😀x'.repeat(1000 + Math.floor(rnd() * 40_000)),
      () => `tiny ${i}`,
      () => numbered(`m${i}`, 10 + Math.floor(rnd() * 200), 600),
    ][kind]!();
    files[name] = body;
    await t.rt.vfs.write(goalId, name, body, meta);
  }
  const all = Object.keys(files);
  for (let round = 0; round < 150; round++) {
    const budget = 1000 + Math.floor(rnd() ** 2 * 300_000);
    const picked = all.filter(() => rnd() < 0.6);
    if (rnd() < 0.2) picked.splice(Math.floor(rnd() * picked.length), 0, 'missing.md');
    const instruction = round % 3 ? `Do round ${round}.` : LONG_INSTRUCTION.slice(0, Math.floor(rnd() * 20_000) + 1);
    const rt = { vfs: t.rt.vfs, cfg: { vfs: { taskMaxChars: budget } } };
    const task = await buildSubagentTask(rt, job(goalId, picked, instruction));
    const what = `round ${round}: budget ${budget}, ${picked.length} files, instruction ${instruction.length}`;
    assert.ok(task.length <= budget, `${what}: ${task.length} chars`);
    if (!picked.length && instruction.length <= budget) assert.equal(task, instruction, what);
    if (budget < instruction.length + 500 * picked.length + 100) continue; // too small for a file line each
    assert.ok(task.endsWith(`\n\n## Task\n${instruction}`), what);
    let pos = 0;
    let cut = false;
    for (const name of picked) {
      pos = task.indexOf(`# ${name}\n`, pos);
      assert.ok(pos >= 0, `${what}: ${name} missing or out of order`);
      const body = task.slice(pos + name.length + 3);
      const c = files[name];
      if (c === undefined) assert.ok(body.startsWith('(not available'), what);
      else if (body.startsWith(`${c}\n\n`)) assert.ok(!cut, `${what}: ${name} whole after a cut`);
      else if (body.startsWith(`[deepq: ${name} is not included`)) cut = true;
      else {
        assert.ok(!cut, `${what}: a second file cut`);
        const at = body.indexOf(`[deepq: ${name} is cut here`);
        assert.ok(at >= 100, `${what}: ${name}: ${body.slice(0, 200)}`);
        assert.ok(c.startsWith(body.slice(0, at - 1)), `${what}: ${name}: the shown part is the file's start`);
        cut = true;
      }
    }
  }
});

test('a very long first line is shown in part, and read_file reads on from that line', async () => {
  const goalId = await t.newGoal();
  const huge = `${'z'.repeat(300_000)}\nsecond line\n`;
  await t.rt.vfs.write(goalId, 'one-line.json', huge, meta);
  const task = await buildSubagentTask(t.rt, job(goalId, ['one-line.json'], 'Summarise.'));
  assert.ok(task.length <= 200_000 && task.length > 199_000, `${task.length}`);
  const body = section(task, 'one-line.json', '## Task');
  const m = new RegExp(
    '\\n\\[deepq: one-line\\.json is cut here .* It has 2 lines \\(300013 chars\\); ' +
      'only the first (\\d+) chars of line 1 are shown above\\. .*"offset":0,',
  ).exec(body);
  assert.ok(m, body.slice(-400));
  assert.equal(body.slice(0, Number(m[1])), huge.slice(0, Number(m[1])));
  // The marker says where the line goes on, and read_file reads on from exactly there.
  assert.match(body, new RegExp(`\\{"name":"one-line\\.json","offset":0,"char_offset":${m[1]}\\}`));
  const next = await readTool(goalId).run({ name: 'one-line.json', offset: 0, char_offset: Number(m[1]) });
  assert.match(next, new RegExp(`^\\[one-line\\.json: line 1 of 2, chars ${Number(m[1]) + 1}-`));
  assert.match(
    await readTool(goalId).run({ name: 'one-line.json', offset: 1 }),
    /lines 2-2 of 2; end of file\]\nsecond line$/,
  );
});

test('the budget comes from DEEPQ_TASK_MAX_CHARS; a tiny budget still holds and keeps the instruction', async () => {
  const { vfsRuntime } = await import('../../testing/vfs-runtime.ts');
  const c = vfsRuntime(redis.url, { DEEPQ_TASK_MAX_CHARS: '1000' });
  try {
    assert.equal(c.rt.cfg.vfs.taskMaxChars, 1000);
    const goalId = await c.newGoal();
    const names = Array.from({ length: 20 }, (_, i) => `a-rather-long-artifact-name-number-${i}.md`);
    for (const n of names) await c.rt.vfs.write(goalId, n, numbered(n, 100), meta);
    const task = await buildSubagentTask(c.rt, job(goalId, names, 'Summarise the files.'));
    assert.ok(task.length <= 1000, `${task.length}`);
    assert.ok(task.endsWith('\n\n## Task\nSummarise the files.'), task);
    assert.match(task, /^\[deepq: the read_files are not included: the task reached its 1000-char limit\. Read them/);
    assert.ok(task.includes(names[0]!));
  } finally {
    await c.close();
  }
});

// ---- end to end: the subagent worker, its model, and read_file paging --------------------

let server: MessagesApiServer;
let rt: Runtime & { env: NodeJS.ProcessEnv };
const BUDGET = 30_000;
before(async () => {
  await redis.ready;
  server = await startMessagesApiServer();
  rt = testRuntime(redis.url, server, { DEEPQ_TASK_MAX_CHARS: String(BUDGET) });
});
after(async () => {
  await rt?.close();
  await server?.close();
  if (rt) rmSync(rt.cfg.vfs.blobDir, { recursive: true, force: true });
});

/** A model that reads on from every marker in its task, page by page, then answers. */
function pagingModel(seen: { task?: string; lines: Map<string, string[]>; errors: string[] }) {
  let reading: { name: string; limit: number } | null = null;
  let queue: { name: string; offset: number; limit: number }[] = [];
  return (body: MessagesBody) => {
    const msgs = body.messages;
    if (msgs.length === 1) {
      seen.task = firstUserText(body);
      queue = [...seen.task.matchAll(new RegExp(MARKER_ARGS, 'g'))].map((m) => ({
        name: m[1]!,
        offset: Number(m[2]),
        limit: Number(m[3]),
      }));
      return toolUse('read_file', { name: queue[0]!.name, offset: -5 });
    }
    const result = (msgs[msgs.length - 1]!.content as WireToolResult[])[0]!;
    const out = String(result.content);
    if (result.is_error) seen.errors.push(out);
    else if (reading) {
      const h = /^\[[^\]\n]*; ([^\n]*)\]\n/.exec(out)!;
      seen.lines.get(reading.name)!.push(...out.slice(h[0].length).split('\n'));
      const next = /next page: offset (\d+)/.exec(h[1]!);
      if (next) return toolUse('read_file', { ...reading, offset: Number(next[1]) });
    }
    const go = queue.shift();
    if (!go) return text('Summary: every line of every file was read.');
    reading = { name: go.name, limit: go.limit };
    seen.lines.set(go.name, seen.lines.get(go.name) ?? []);
    return toolUse('read_file', go);
  };
}

test('end to end: the worker sends a task within the budget, and its model reads every line by paging', async () => {
  const goalId = newGoalId();
  await rt.goals.create(goalId, 'Summarise the data', {}, false);
  const data = numbered('row', 3000);
  const log = numbered('log', 2000);
  await rt.vfs.write(goalId, 'data.csv', data, meta);
  await rt.vfs.write(goalId, 'big.log', log, meta);
  assert.ok((await rt.vfs.stat(goalId, 'data.csv'))!.blobRef, 'data.csv spilled');
  assert.ok(data.length > 4 * BUDGET && log.length > 3 * BUDGET);
  const seen: { task?: string; lines: Map<string, string[]>; errors: string[] } = { lines: new Map(), errors: [] };
  server.setHandler(pagingModel(seen));
  const data0 = { ...job(goalId, ['data.csv', 'big.log'], 'Summarise data.csv and big.log.'), step: 1 };
  const role = rt.cfg.roles.find((r) => r.name === 'research-specialist')!;
  const fakeJob = { id: `${goalId}:1:0`, data: data0, attemptsMade: 0 } as unknown as Job;
  const res = await processSubagentJob({ rt, role, queue: {} as Queue }, fakeJob);
  assert.equal(res.status, 'done', res.notes ?? '');

  const task = seen.task!;
  assert.ok(task.length <= BUDGET, `the model got ${task.length} chars`);
  assert.ok(task.endsWith('## Task\nSummarise data.csv and big.log.'));
  assert.equal(seen.errors.length, 1);
  assert.match(seen.errors[0]!, /^error: bad arguments for read_file: offset: offset must be 0 or more/);
  const shown = splitLines(section(task, 'data.csv', '# big.log').split('[deepq: data.csv is cut here')[0]!);
  assert.deepEqual([...shown, ...seen.lines.get('data.csv')!], splitLines(data), 'every line of data.csv');
  assert.deepEqual(seen.lines.get('big.log'), splitLines(log), 'every line of big.log');
  assert.equal(await rt.vfs.read(goalId, 'out.md'), 'Summary: every line of every file was read.');
});
