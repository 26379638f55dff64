// The subagent tools, scoped to one goal's virtual FS. There is no tool that dispatches
// agents: subagents cannot recurse.
import { z } from 'zod';
import type { VirtualFs } from '../vfs/vfs.ts';
import { formatIndex } from '../vfs/vfs.ts';
import { formatZodIssues } from '../zod.ts';
import type { ToolDef } from './providers/types.ts';
import type { TOOL_NAMES } from './roles.ts';

export interface Tool {
  def: ToolDef;
  run(input: unknown): Promise<string>;
}

export interface ToolScope {
  goalId: string;
  step: number;
  role: string;
  threadId: string;
  writer: string;
}

const ReadArgs = z
  .object({
    name: z.string(),
    offset: z.number().int().min(0, 'offset must be 0 or more (the 0-based first line)').optional(),
    limit: z.number().int().min(1, 'limit must be 1 or more (a number of lines)').optional(),
  })
  .strict();
const WriteArgs = z.object({ name: z.string(), content: z.string() }).strict();
const ListArgs = z.object({}).strict();

function args<T>(schema: z.ZodType<T>, input: unknown, tool: string): T {
  const r = schema.safeParse(input ?? {});
  if (!r.success) throw new Error(`bad arguments for ${tool}: ${formatZodIssues(r.error)}`);
  return r.data;
}

/**
 * A page of read_file (offset/limit) holds at most this many chars, cut at a line boundary,
 * so the agent loop's tool-result limit (50,000 chars by default) never silently drops lines
 * the page header claims to show.
 */
export const READ_PAGE_MAX_CHARS = 40_000;

/** The lines of a text, split at "\n"; a final "\n" ends the last line, it starts no new one. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** How many lines splitLines finds, without building them. */
export function countLines(text: string): number {
  if (text === '') return 0;
  let n = text.endsWith('\n') ? 0 : 1;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** `text` cut to at most `max` chars, never between the halves of a surrogate pair. */
export function cutChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max);
  const c = text.charCodeAt(end - 1);
  if (end > 0 && c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}

/** A `limit` to suggest for paging through `text` from line `from`: about one page of READ_PAGE_MAX_CHARS. */
export function suggestedLimit(chars: number, lines: number, from: number): number {
  const perLine = lines > 0 ? chars / lines : 1;
  const fit = Math.max(1, Math.floor(READ_PAGE_MAX_CHARS / Math.max(1, perLine)) - 1);
  return Math.max(1, Math.min(fit, lines - from));
}

/**
 * Lines `offset` .. `offset + limit - 1` (0-based) of an artifact, after a header naming them
 * 1-based (`lines 101-200 of 5000`) and the offset of the next page. A page is cut at a line
 * boundary to pageMaxChars (the header then says so); a single line longer than that shows
 * only its start.
 */
export function readPage(
  name: string,
  content: string,
  offset: number,
  limit: number | undefined,
  pageMaxChars = READ_PAGE_MAX_CHARS,
): string {
  const lines = splitLines(content);
  const total = lines.length;
  if (total === 0) {
    if (offset > 0) throw new Error(`offset ${offset} is past the end of ${name}: it is empty (0 lines)`);
    return `[${name}: empty, 0 lines]`;
  }
  if (offset >= total) {
    throw new Error(
      `offset ${offset} is past the end of ${name}: it has ${total} lines, so offset must be 0-${total - 1}`,
    );
  }
  const want = Math.min(limit ?? total, total - offset);
  const out: string[] = [];
  let chars = 0;
  for (let i = offset; i < offset + want; i++) {
    const line = lines[i]!;
    const cost = line.length + (out.length ? 1 : 0);
    if (out.length && chars + cost > pageMaxChars) break;
    out.push(line);
    chars += cost;
  }
  const notes: string[] = [];
  if (out[0]!.length > pageMaxChars) {
    notes.push(`line ${offset + 1} is ${out[0]!.length} chars long: only its first ${pageMaxChars} are shown`);
    out[0] = cutChars(out[0]!, pageMaxChars);
  } else if (out.length < want) {
    notes.push(`page cut to ${pageMaxChars} chars: ${out.length} of the ${want} lines asked for`);
  }
  const next = offset + out.length;
  notes.push(next < total ? `next page: offset ${next}` : 'end of file');
  return `[${name}: lines ${offset + 1}-${next} of ${total}; ${notes.join('; ')}]\n${out.join('\n')}`;
}

export function createVfsTools(
  vfs: VirtualFs,
  scope: ToolScope,
  names: readonly (typeof TOOL_NAMES)[number][],
  opts: { pageMaxChars?: number } = {},
): Tool[] {
  const all: Record<(typeof TOOL_NAMES)[number], Tool> = {
    read_file: {
      def: {
        name: 'read_file',
        description:
          'Read an artifact of this goal by name. For a large artifact, read it a page at a time: offset is ' +
          'the first line to return (0-based), limit the number of lines. A page starts with a header such as ' +
          '"[report.md: lines 101-200 of 5000; next page: offset 200]". Without offset and limit the whole ' +
          'artifact is returned (long results are truncated).',
        input_schema: {
          type: 'object',
          properties: {
            name: { type: 'string' },
            offset: { type: 'integer', minimum: 0, description: 'First line to return, 0-based (default 0).' },
            limit: { type: 'integer', minimum: 1, description: 'Number of lines to return (default: to the end).' },
          },
          required: ['name'],
          additionalProperties: false,
        },
      },
      async run(input) {
        const { name, offset, limit } = args(ReadArgs, input, 'read_file');
        // Names are checked before any key is built: a name cannot reach another goal.
        vfs.check(name, '');
        const content = await vfs.read(scope.goalId, name);
        if (content === null) throw new Error(`no such file: ${name}`);
        if (offset === undefined && limit === undefined) return content;
        return readPage(name, content, offset ?? 0, limit, opts.pageMaxChars);
      },
    },
    write_file: {
      def: {
        name: 'write_file',
        description: 'Write (create or replace) an artifact of this goal.',
        input_schema: {
          type: 'object',
          properties: { name: { type: 'string' }, content: { type: 'string' } },
          required: ['name', 'content'],
          additionalProperties: false,
        },
      },
      async run(input) {
        const { name, content } = args(WriteArgs, input, 'write_file');
        const e = await vfs.write(scope.goalId, name, content, {
          status: 'active',
          step: scope.step,
          role: scope.role,
          threadId: scope.threadId,
          writer: scope.writer,
        });
        return `wrote ${name} (${e.bytes} bytes, version ${e.version})`;
      },
    },
    list_files: {
      def: {
        name: 'list_files',
        description: 'List the artifacts of this goal: name, status, bytes.',
        input_schema: { type: 'object', properties: {}, additionalProperties: false },
      },
      async run(input) {
        args(ListArgs, input, 'list_files');
        return formatIndex(await vfs.index(scope.goalId));
      },
    },
  };
  return names.map((n) => all[n]);
}
