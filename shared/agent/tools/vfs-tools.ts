// The built-in virtual-FS tools, each scoped to its job's goal: every name is checked before
// a key is built, and every write goes through VirtualFs's versioned, idempotent writes.
import { z } from 'zod';
import { ErrorCode, hasCode } from '../../errors.ts';
import type { FileEntry, VirtualFs, WriteMeta } from '../../vfs/vfs.ts';
import { formatIndex } from '../../vfs/vfs.ts';
import { MCP_TOOL_RE, SANDBOX_TOOL_NAMES, TOOL_NAMES } from '../roles.ts';
import { compileGlob, GLOB_MAX_CHARS } from './glob.ts';
import { compilePattern, GREP_LIMITS, type GrepFile, type GrepLimits, scanFiles } from './grep.ts';
import { cutChars, readPage } from './paging.ts';
import {
  defineTool,
  type Tool,
  type ToolContext,
  ToolRegistry,
  type ToolScope,
  type ToolSpec,
  toolContext,
} from './registry.ts';

export type BuiltinToolName = (typeof TOOL_NAMES)[number];

export interface VfsToolOptions {
  /** read_file's page limit (default READ_PAGE_MAX_CHARS); keep it under the loop's tool-result cut. */
  pageMaxChars?: number;
  grep?: Partial<GrepLimits>;
}

const Name = z.string().describe('Artifact name, e.g. "report.md" or "src/app.py".');
const Glob = z
  .string()
  .min(1, 'glob must not be empty')
  .max(GLOB_MAX_CHARS)
  .describe('Glob over artifact names: * within a folder, ** across folders, ?, [a-z], {a,b}. E.g. "src/**/*.py".');

const ReadInput = z
  .object({
    name: Name,
    offset: z
      .number()
      .int()
      .min(0, 'offset must be 0 or more (the 0-based first line)')
      .optional()
      .describe('First line to return, 0-based (default 0).'),
    limit: z
      .number()
      .int()
      .min(1, 'limit must be 1 or more (a number of lines)')
      .optional()
      .describe('Number of lines to return (default: to the end).'),
    char_offset: z
      .number()
      .int()
      .min(0, 'char_offset must be 0 or more')
      .optional()
      .describe('Within a line too long for one page: the first char to return, 0-based (the header names it).'),
  })
  .strict();
const WriteInput = z.object({ name: Name, content: z.string().describe('The whole new content.') }).strict();
const EditInput = z
  .object({
    name: Name,
    old_string: z.string().min(1, 'old_string must not be empty').describe('The exact text to replace.'),
    new_string: z.string().describe('The text to put in its place.'),
    replace_all: z.boolean().default(false).describe('Replace every occurrence (default: exactly one must exist).'),
  })
  .strict();
const ListInput = z.object({ glob: Glob.optional() }).strict();
const GrepInput = z
  .object({
    pattern: z.string().min(1, 'pattern must not be empty').max(1000).describe('A JavaScript regular expression.'),
    glob: Glob.optional(),
    ignore_case: z.boolean().default(false).describe('Match without regard to case (default false).'),
  })
  .strict();
const DeleteInput = z.object({ name: Name }).strict();

const SANDBOX_TOOLS: ReadonlySet<string> = new Set(SANDBOX_TOOL_NAMES);
const live = (e: FileEntry | null): e is FileEntry => e !== null && e.status !== 'evicted';

/**
 * A write by this job: status active, this step, role, thread and writer. Only its subtask's own
 * artifact may replace finished work (a planned revision, old version kept); any other `done`
 * artifact is refused.
 */
export function toolWriteMeta(ctx: ToolScope, name: string, read?: Pick<FileEntry, 'version' | 'op'>): WriteMeta {
  const { step, role, threadId, writer, lock } = ctx;
  const own = name === ctx.artifact;
  return {
    status: 'active',
    step,
    role,
    threadId,
    writer,
    ...(lock ? { lock } : {}),
    ...(own ? { keepHistory: true } : { refuseDone: true }),
    // The entry it read, exactly: a rewrite since (same version, same writer) is a conflict too.
    ...(read ? { expectedVersion: read.version, expectedOp: read.op } : {}),
  };
}

async function noSuchFile(vfs: VirtualFs, goalId: string, name: string): Promise<never> {
  const e = await vfs.stat(goalId, name);
  throw new Error(`no such file: ${name}${e?.status === 'evicted' ? ' (it was deleted or evicted)' : ''}`);
}

async function mustRead(vfs: VirtualFs, goalId: string, name: string): Promise<string> {
  vfs.check(name, '');
  return (await vfs.read(goalId, name)) ?? noSuchFile(vfs, goalId, name);
}

function conflict(err: unknown, name: string, what: string): never {
  if (hasCode(err, ErrorCode.VersionConflict)) {
    throw new Error(
      `${name} changed while it was being ${what} (${err.message}); nothing was changed: read it and retry`,
    );
  }
  throw err;
}

function readFile(vfs: VirtualFs, opts: VfsToolOptions) {
  return defineTool({
    name: 'read_file',
    description:
      'Read an artifact of this goal by name. For a large artifact, read it a page at a time: offset is ' +
      'the first line to return (0-based), limit the number of lines. A page starts with a header such as ' +
      '"[report.md: lines 101-200 of 5000; next page: offset 200]"; a line too long for a page is read in ' +
      'parts with char_offset, as its header says. Without offset and limit the whole artifact is returned ' +
      '(long results are truncated).',
    input: ReadInput,
    async run({ name, offset, limit, char_offset }, ctx) {
      // Names are checked before any key is built: a name cannot reach another goal.
      const content = await mustRead(vfs, ctx.goalId, name);
      if (offset === undefined && limit === undefined && char_offset === undefined) return content;
      return readPage(name, content, offset ?? 0, limit, opts.pageMaxChars, char_offset);
    },
  });
}

function writeFile(vfs: VirtualFs) {
  return defineTool({
    name: 'write_file',
    description: 'Write (create or replace) an artifact of this goal with the whole content given.',
    input: WriteInput,
    async run({ name, content }, ctx) {
      const e = await vfs.write(ctx.goalId, name, content, toolWriteMeta(ctx, name));
      return `wrote ${name} (${e.bytes} bytes, version ${e.version})`;
    },
  });
}

/**
 * How often `needle` occurs in `text` (non-overlapping, left to right) and where the first `keep`
 * are, counting no further than `stop`: a 4 MB file holds 4 million one-char matches.
 */
function occurrences(text: string, needle: string, keep: number, stop = Number.POSITIVE_INFINITY) {
  const first: number[] = [];
  let count = 0;
  let i = text.indexOf(needle);
  for (; i !== -1 && count < stop; i = text.indexOf(needle, i + needle.length)) {
    if (count++ < keep) first.push(i);
  }
  return { count, first, more: i !== -1 };
}

/**
 * Refuses, before it is built, an edit whose result would be over the artifact limit, with the
 * write's message: replace_all of one char by a hundred turns 4 MB into gigabytes, which the
 * write would refuse only after the whole string was made (memory, and the event loop blocked
 * for seconds). For replace_all, counting stops at the occurrence that takes it past the limit.
 */
function checkEditSize(vfs: VirtualFs, name: string, content: string, edit: z.infer<typeof EditInput>) {
  const max = vfs.opts.maxArtifactBytes;
  const bytes = Buffer.byteLength(content, 'utf8');
  const growth = Buffer.byteLength(edit.new_string, 'utf8') - Buffer.byteLength(edit.old_string, 'utf8');
  if (growth <= 0) return; // no larger than now: the write's own check is enough
  const overAt = Math.max(1, Math.floor((max - bytes) / growth) + 1);
  const n = edit.replace_all ? occurrences(content, edit.old_string, 0, overAt) : { count: 1, more: false };
  if (n.count >= overAt) vfs.checkSize(name, bytes + n.count * growth, n.more);
}

/** The line numbers of ascending positions in `text`, in one pass (no copy of the text per position). */
function linesOf(text: string, positions: number[]): number[] {
  const lines: number[] = [];
  let line = 1;
  let from = 0;
  for (const at of positions) {
    for (let nl = text.indexOf('\n', from); nl !== -1 && nl < at; nl = text.indexOf('\n', nl + 1)) line++;
    from = at;
    lines.push(line);
  }
  return lines;
}

function editFile(vfs: VirtualFs) {
  return defineTool({
    name: 'edit_file',
    description:
      'Edit an artifact of this goal by exact string replacement: old_string (copied exactly from the file, ' +
      'whitespace and line breaks included) becomes new_string. old_string must occur exactly once, unless ' +
      'replace_all is true; give more surrounding lines to make it unique. Writes a new version.',
    input: EditInput,
    async run(edit, ctx) {
      const { name, old_string, new_string, replace_all } = edit;
      vfs.check(name, '');
      // The version first, then the content: a write in between makes ours a version conflict.
      const before = await vfs.stat(ctx.goalId, name);
      const content = live(before) ? await vfs.read(ctx.goalId, name) : null;
      if (!live(before) || content === null) return noSuchFile(vfs, ctx.goalId, name);
      if (old_string === new_string) throw new Error('old_string and new_string are the same: nothing to change');
      const at = occurrences(content, old_string, 10, replace_all ? 1 : Number.POSITIVE_INFINITY);
      if (at.count === 0) {
        throw new Error(
          `old_string was not found in ${name}; nothing was changed. Read the file and copy the text exactly, ` +
            'whitespace and line breaks included',
        );
      }
      if (at.count > 1 && !replace_all) {
        const lines = linesOf(content, at.first);
        const where = `at lines ${lines.join(', ')}${at.count > 10 ? ', …' : ''}`;
        throw new Error(
          `old_string occurs ${at.count} times in ${name} (${where}); nothing was changed. ` +
            'Include more surrounding text so it occurs once, or set replace_all: true',
        );
      }
      checkEditSize(vfs, name, content, edit);
      const parts = replace_all ? content.split(old_string) : null;
      const next = parts
        ? parts.join(new_string)
        : content.slice(0, at.first[0]) + new_string + content.slice(at.first[0]! + old_string.length);
      const e = await vfs
        .write(ctx.goalId, name, next, toolWriteMeta(ctx, name, before))
        .catch((err) => conflict(err, name, 'edited'));
      const n = parts ? parts.length - 1 : 1;
      return `edited ${name}: replaced ${n} occurrence${n === 1 ? '' : 's'} (${e.bytes} bytes, version ${e.version})`;
    },
  });
}

function listFiles(vfs: VirtualFs) {
  return defineTool({
    name: 'list_files',
    description:
      'List the artifacts of this goal: name, status, bytes; deleted or evicted names show as [evicted]. ' +
      'glob keeps only the names it matches.',
    input: ListInput,
    async run({ glob }, ctx) {
      const match = glob === undefined ? null : compileGlob(glob);
      const entries = await vfs.index(ctx.goalId);
      const shown = match ? entries.filter((e) => match(e.name)) : entries;
      if (match && shown.length === 0) return `(no files match ${JSON.stringify(glob)})`;
      return formatIndex(shown);
    },
  });
}

/** The live artifacts `match` keeps, read in name order until `scanMaxChars` is spent. */
async function gatherFiles(
  vfs: VirtualFs,
  goalId: string,
  match: ((name: string) => boolean) | null,
  scanMaxChars: number,
): Promise<{ files: GrepFile[]; partial?: string; skipped: number }> {
  const names = (await vfs.index(goalId))
    .filter((e) => e.status !== 'evicted' && (!match || match(e.name)))
    .map((e) => e.name)
    .sort();
  const files: GrepFile[] = [];
  let budget = scanMaxChars;
  let partial: string | undefined;
  let skipped = 0;
  for (const name of names) {
    if (budget <= 0) {
      skipped++;
      continue;
    }
    const text = await vfs.read(goalId, name);
    if (text === null) continue; // deleted meanwhile
    if (text.length > budget) partial = name;
    files.push({ name, text: cutChars(text, budget) });
    budget -= text.length;
  }
  return { files, partial, skipped };
}

/** grep's answer: a header line saying what was searched and which bound was hit, then `name:line: text`. */
function formatGrep(
  q: { pattern: string; glob?: string; ignore_case: boolean },
  limits: GrepLimits,
  searched: number,
  partial: string | undefined,
  skipped: number,
  { hits, more, cut }: ReturnType<typeof scanFiles>,
): string {
  const where = `in ${searched} file(s)${q.glob === undefined ? '' : ` matching ${JSON.stringify(q.glob)}`}`;
  const found = `${hits.length} match${hits.length === 1 ? '' : 'es'}${more ? ' shown' : ''}`;
  const head = hits.length ? `${found} ${where}` : `no matches for /${q.pattern}/${q.ignore_case ? 'i' : ''} ${where}`;
  const scanNote =
    `scan limit of ${limits.scanMaxChars} chars reached: ${partial ? `${partial} searched in part, ` : ''}` +
    `${skipped} file(s) not searched; narrow with glob`;
  const notes = [
    more ? `stopped at ${limits.maxMatches} matches, there are more: narrow the pattern or the glob` : '',
    cut ? `lines cut at ${limits.lineMaxChars} chars` : '',
    partial || skipped ? scanNote : '',
  ].filter(Boolean);
  const lines = hits.map((h) => `${h.name}:${h.line}: ${h.text}`);
  return [`[${[head, ...notes].join('; ')}]`, ...lines].join('\n');
}

function grep(vfs: VirtualFs, limits: GrepLimits) {
  return defineTool({
    name: 'grep',
    description:
      "Search this goal's artifacts for a JavaScript regular expression, line by line. Returns " +
      `"name:line: text" for each matching line (at most ${limits.maxMatches} matches, lines cut at ` +
      `${limits.lineMaxChars} chars). glob limits the files searched; ignore_case matches without regard to case.`,
    input: GrepInput,
    async run({ pattern, glob, ignore_case }, ctx) {
      const re = compilePattern(pattern, ignore_case);
      const match = glob === undefined ? null : compileGlob(glob);
      const { files, partial, skipped } = await gatherFiles(vfs, ctx.goalId, match, limits.scanMaxChars);
      return formatGrep(
        { pattern, glob, ignore_case },
        limits,
        files.length,
        partial,
        skipped,
        scanFiles(re, files, limits),
      );
    },
  });
}

function deleteFile(vfs: VirtualFs) {
  return defineTool({
    name: 'delete_file',
    description:
      'Delete an artifact of this goal. Its name stays in the index as [evicted] until the next cycle, so ' +
      'the planner sees it is gone; read_file then finds no such file, and write_file may create it again.',
    input: DeleteInput,
    async run({ name }, ctx) {
      vfs.check(name, '');
      // Its own artifact is what the subtask must leave: deleted in a revision that then failed,
      // the done version was lost for good (the failure restores it only from a working copy).
      if (name === ctx.artifact)
        throw new Error(`${name} is the artifact this subtask must write: write its content instead of deleting it`);
      const e = await vfs.stat(ctx.goalId, name);
      if (!live(e)) return noSuchFile(vfs, ctx.goalId, name);
      await vfs.delete(ctx.goalId, name, toolWriteMeta(ctx, name, e)).catch((err) => conflict(err, name, 'deleted'));
      return `deleted ${name}`;
    },
  });
}

/** The built-in tools' specs over one VirtualFs, in TOOL_NAMES order. */
export function vfsToolSpecs(vfs: VirtualFs, opts: VfsToolOptions = {}): ToolSpec[] {
  const specs: Record<BuiltinToolName, ToolSpec> = {
    read_file: readFile(vfs, opts),
    write_file: writeFile(vfs),
    edit_file: editFile(vfs),
    list_files: listFiles(vfs),
    grep: grep(vfs, { ...GREP_LIMITS, ...opts.grep }),
    delete_file: deleteFile(vfs),
  };
  return TOOL_NAMES.map((n) => specs[n]);
}

/** Registries built so far, per store and options: a job binds one, not builds its specs again. */
const registries = new WeakMap<VirtualFs, Map<string, ToolRegistry>>();

export function vfsToolRegistry(vfs: VirtualFs, opts: VfsToolOptions = {}): ToolRegistry {
  const key = JSON.stringify([opts.pageMaxChars, opts.grep]);
  const byOptions = registries.get(vfs) ?? new Map<string, ToolRegistry>();
  registries.set(vfs, byOptions);
  const registry = byOptions.get(key) ?? new ToolRegistry(vfsToolSpecs(vfs, opts));
  byOptions.set(key, registry);
  return registry;
}

/**
 * A job's built-in tools: the role's configured names bound to its scope, in the order
 * configured. `mcp:` names are left out (the worker's extraTools binds those), and so are the
 * sandbox tools (createSandboxTools binds those).
 */
export function createVfsTools(
  vfs: VirtualFs,
  scope: ToolScope,
  names: readonly string[],
  opts: VfsToolOptions & { signal?: AbortSignal; log?: ToolContext['log'] } = {},
): Tool[] {
  const builtin = names.filter((n) => !MCP_TOOL_RE.test(n) && !SANDBOX_TOOLS.has(n));
  return vfsToolRegistry(vfs, opts).bind(builtin, toolContext(scope, opts));
}
