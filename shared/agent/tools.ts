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

const ReadArgs = z.object({ name: z.string() }).strict();
const WriteArgs = z.object({ name: z.string(), content: z.string() }).strict();
const ListArgs = z.object({}).strict();

function args<T>(schema: z.ZodType<T>, input: unknown, tool: string): T {
  const r = schema.safeParse(input ?? {});
  if (!r.success) throw new Error(`bad arguments for ${tool}: ${formatZodIssues(r.error)}`);
  return r.data;
}

export function createVfsTools(
  vfs: VirtualFs,
  scope: ToolScope,
  names: readonly (typeof TOOL_NAMES)[number][],
): Tool[] {
  const all: Record<(typeof TOOL_NAMES)[number], Tool> = {
    read_file: {
      def: {
        name: 'read_file',
        description: 'Read an artifact of this goal by name.',
        input_schema: {
          type: 'object',
          properties: { name: { type: 'string' } },
          required: ['name'],
          additionalProperties: false,
        },
      },
      async run(input) {
        const { name } = args(ReadArgs, input, 'read_file');
        // Names are checked before any key is built: a name cannot reach another goal.
        vfs.check(name, '');
        const content = await vfs.read(scope.goalId, name);
        if (content === null) throw new Error(`no such file: ${name}`);
        return content;
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
