// An MCP tool's input schema as model APIs take it. The Messages API refuses a whole request
// (400, every call of the role failing) when any tool's input schema has anyOf, oneOf or allOf
// at its top level, which some MCP servers publish (fields required in alternatives); OpenAI's
// function parameters must be a plain object schema too. Those combinators move into the
// tool's description, where the model still reads them; the server checks its input anyway.

import { cutChars } from '../tools/paging.ts';

const TOP_LEVEL_REFUSED = ['anyOf', 'oneOf', 'allOf'] as const;
/** The moved combinators' JSON, at most this long in the description. */
const MOVED_MAX_CHARS = 2000;

export interface ModelInputSchema {
  inputSchema: Record<string, unknown>;
  /** The description with the moved combinators appended, when any were moved. */
  description?: string;
  /** Which combinators moved, for the warning. */
  moved: string[];
}

/** `schema` without `$schema` (the dialect: nothing a model needs) and top-level combinators. */
export function modelInputSchema(schema: Record<string, unknown>, description?: string): ModelInputSchema {
  const { $schema: _dialect, ...rest } = schema;
  const moved = TOP_LEVEL_REFUSED.filter((k) => rest[k] !== undefined);
  if (moved.length === 0) return { inputSchema: rest, description, moved };
  const constraints: Record<string, unknown> = {};
  for (const k of moved) {
    constraints[k] = rest[k];
    delete rest[k];
  }
  let json = JSON.stringify(constraints);
  if (json.length > MOVED_MAX_CHARS) json = `${cutChars(json, MOVED_MAX_CHARS)}…`;
  const note = `The input must also satisfy this JSON Schema: ${json}`;
  return {
    inputSchema: { type: 'object', ...rest },
    description: description ? `${description}\n\n${note}` : note,
    moved,
  };
}

/** Deeper than this, or longer as JSON, an input schema is no tool's: it would break every call. */
export const MAX_INPUT_SCHEMA_DEPTH = 64;
export const MAX_INPUT_SCHEMA_CHARS = 64 * 1024;

/**
 * Why a listed input schema cannot go to the model, or null. 50,000 levels deep, it overflowed
 * the stack of every request of the role (JSON.stringify); 2.9 MB, every request was past any
 * context window. Measured without recursion, so the check cannot overflow itself.
 */
export function inputSchemaProblem(schema: unknown): string | null {
  const stack: [unknown, number][] = [[schema, 1]];
  while (stack.length) {
    const [node, depth] = stack.pop()!;
    if (depth > MAX_INPUT_SCHEMA_DEPTH) return `its input schema nests deeper than ${MAX_INPUT_SCHEMA_DEPTH} levels`;
    if (node && typeof node === 'object') for (const v of Object.values(node)) stack.push([v, depth + 1]);
  }
  const chars = JSON.stringify(schema).length;
  if (chars > MAX_INPUT_SCHEMA_CHARS)
    return `its input schema is ${chars} characters of JSON (at most ${MAX_INPUT_SCHEMA_CHARS})`;
  return null;
}
