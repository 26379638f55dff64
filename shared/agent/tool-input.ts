// A tool call's input is the model's: untrusted. One nested a few thousand levels deep (10 KB of
// brackets) overflows the stack wherever the conversation is serialised (its checkpoint, its
// transcript, the next request), failing the job on every attempt. Such an input is replaced
// where it enters the conversation by a marker; the call is not run and its result says why.
import type { ContentBlock, ModelResponse, ToolUseBlock } from './providers/types.ts';

/** Deepest a tool input may nest (objects and arrays); real tool schemas stay far below. */
export const MAX_TOOL_INPUT_DEPTH = 64;
/** The marker's one key: kept in checkpoints, so a resumed run refuses the call as well. */
const REFUSED_INPUT = 'deepq_refused_input';

/** The response with each too-deep tool input replaced by the marker. */
export function withBoundedToolInputs(res: ModelResponse): ModelResponse {
  if (!res.content.some((b) => b.type === 'tool_use' && nestsTooDeep(b.input, 0))) return res;
  return { ...res, content: res.content.map(bounded) };
}

function bounded(b: ContentBlock): ContentBlock {
  if (b.type !== 'tool_use' || !nestsTooDeep(b.input, 0)) return b;
  return { ...b, input: { [REFUSED_INPUT]: `the input nests deeper than ${MAX_TOOL_INPUT_DEPTH} levels` } };
}

function nestsTooDeep(v: unknown, depth: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (depth >= MAX_TOOL_INPUT_DEPTH) return true;
  for (const x of Array.isArray(v) ? v : Object.values(v)) if (nestsTooDeep(x, depth + 1)) return true;
  return false;
}

/** Why the call's input was refused, or undefined for one that may run. */
export function refusedInput(use: ToolUseBlock): string | undefined {
  const input = use.input as Record<string, unknown> | null;
  const why = input && typeof input === 'object' ? input[REFUSED_INPUT] : undefined;
  return typeof why === 'string' ? why : undefined;
}
