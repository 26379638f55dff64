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
