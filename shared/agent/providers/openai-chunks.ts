// Streamed Chat Completions chunks as the openai SDK's assembly (ChatCompletionStream) expects
// them. Lax servers (Ollama, Gemini's OpenAI-compatible endpoint, mistral.rs) leave `index` or
// `type` out of a tool call's pieces: the SDK then drops the call without a word (no index) or
// fails the whole answer (no type), where the same answer sent whole works. Each piece gets what
// it lacks: its index by its id (a new id is the next call; a piece without one continues the
// last call, or starts the next when it names a function again), and the type `function`.
import type OpenAI from 'openai';
import { mendedStream } from './mended-stream.ts';

type Chunk = OpenAI.ChatCompletionChunk;
type ToolCallDelta = OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall;

/** Per choice: the index of each call id seen, the last call's index and whether it had a name. */
interface Calls {
  byId: Map<string, number>;
  next: number;
  last?: { index: number; named: boolean };
}

function indexOf(calls: Calls, d: Partial<ToolCallDelta>): number {
  if (typeof d.index === 'number') return d.index;
  if (d.id) {
    const known = calls.byId.get(d.id);
    if (known !== undefined) return known;
  } else if (calls.last && !(d.function?.name && calls.last.named)) return calls.last.index;
  return calls.next;
}

function fixed(calls: Calls, d: Partial<ToolCallDelta>): ToolCallDelta {
  const index = indexOf(calls, d);
  if (d.id) calls.byId.set(d.id, index);
  calls.next = Math.max(calls.next, index + 1);
  const named = (calls.last?.index === index && calls.last.named) || Boolean(d.function?.name);
  calls.last = { index, named };
  return { ...d, index, type: d.type ?? 'function' } as ToolCallDelta;
}

/** A function that mends each chunk of one streamed answer, in order. */
export function laxToolCallMender(): (chunk: Chunk) => Chunk {
  const choices = new Map<number, Calls>();
  return (chunk) => {
    if (!chunk.choices?.some((c) => c.delta?.tool_calls?.length)) return chunk;
    const mended = chunk.choices.map((c) => {
      if (!c.delta?.tool_calls?.length) return c;
      const calls = choices.get(c.index ?? 0) ?? { byId: new Map<string, number>(), next: 0 };
      choices.set(c.index ?? 0, calls);
      return { ...c, delta: { ...c.delta, tool_calls: c.delta.tool_calls.map((d) => fixed(calls, d)) } };
    });
    return { ...chunk, choices: mended };
  };
}

/** The chunks, mended, as `ChatCompletionStream.fromReadableStream` reads them; `heard` hears each. */
export function mendedChunkStream(chunks: AsyncIterable<Chunk>, heard: () => void): ReadableStream<Uint8Array> {
  return mendedStream(chunks, laxToolCallMender(), heard);
}
