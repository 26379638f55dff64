// Anthropic prompt caching. Breakpoints (cache_control) go on the system prompt, the tool
// list and the conversation's latest turn, so each turn of a tool loop reads everything up
// to the turn before from the cache and pays in full only for what the last turn added.
// The system text is unchanged (P52: the role's prompt and nothing else).
//
// The request is marked on copies: the agent's own history (and so its transcript) never
// carries cache_control. That moves the history breakpoint each turn, which is how the API
// means it to be used: cache_control is not part of the cached prefix, and a breakpoint
// finds the prefix cached by the previous turn by looking back about 20 blocks from itself.
// A turn that adds more blocks than that (many parallel tool calls) also gets a breakpoint
// on the previous turn's end. The API allows 4 breakpoints; the oldest history ones go first.
import type { Message, ModelRequest } from '../providers/types.ts';
import type { ModelMiddleware } from './types.ts';

export const MAX_BREAKPOINTS = 4;
/**
 * New blocks past which a turn's breakpoint alone may not find the previous turn's prefix
 * (the API looks back "about 20" blocks; 16 keeps a margin).
 */
export const LOOKBACK_BLOCKS = 16;

type Block = Exclude<Message['content'], string>[number];
type Marked = { cache_control?: { type: 'ephemeral' } };
const EPHEMERAL = { type: 'ephemeral' } as const;

export function promptCache(): ModelMiddleware {
  return (req, _ctx, next) => next(markRequest(req));
}

/** The request with its breakpoints: a new object; `req` and everything in it are untouched. */
export function markRequest(req: ModelRequest): ModelRequest {
  const system = typeof req.system === 'string' ? [{ type: 'text' as const, text: req.system }] : req.system;
  const cachedSystem = system.map((b, i) => (i === system.length - 1 ? mark(b) : b));
  const tools = req.tools?.map((t, i, all) => (i === all.length - 1 ? mark(t) : t));
  const budget = MAX_BREAKPOINTS - countMarks(cachedSystem) - countMarks(tools ?? []);
  const messages = markHistory(req.messages, budget, (tools?.length ?? 0) > 0);
  return { ...req, system: cachedSystem, ...(tools ? { tools } : {}), messages };
}

/**
 * A breakpoint on the last block of a final user turn. A first turn is marked only when
 * tools are offered: then a second turn is likely and reads the task from the cache; an
 * agent without tools (planner, reflector) usually answers at once, and a cache write that
 * is never read costs more than no caching. Never more than `budget` marks in all.
 */
function markHistory(messages: Message[], budget: number, toolsOffered: boolean): Message[] {
  const out = [...messages];
  const last = out.length - 1;
  if (last < 0 || out[last]!.role !== 'user' || (last === 0 && !toolsOffered)) return capMarks(out, budget);
  out[last] = markLastBlock(out[last]!);
  const prev = previousUserTurn(out);
  if (prev >= 0 && blocksAfter(out, prev) > LOOKBACK_BLOCKS) out[prev] = markLastBlock(out[prev]!);
  return capMarks(out, budget);
}

/** The last user turn before the latest assistant turn: where the previous request ended. */
function previousUserTurn(messages: Message[]): number {
  for (let i = messages.length - 2; i >= 0; i--) {
    if (messages[i]!.role === 'user' && messages[i + 1]?.role === 'assistant') return i;
  }
  return -1;
}

function blocksAfter(messages: Message[], index: number): number {
  return messages.slice(index + 1).reduce((n, m) => n + (typeof m.content === 'string' ? 1 : m.content.length), 0);
}

/** A copy of the message with a breakpoint on its last block (a string becomes a text block). */
function markLastBlock(m: Message): Message {
  const blocks: Block[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
  if (blocks.length === 0) return m;
  return { ...m, content: blocks.map((b, i) => (i === blocks.length - 1 ? mark(b) : b)) };
}

/** Drops the oldest message breakpoints until at most `budget` are left. */
function capMarks(messages: Message[], budget: number): Message[] {
  let excess = messages.reduce((n, m) => n + (typeof m.content === 'string' ? 0 : countMarks(m.content)), 0) - budget;
  for (let i = 0; i < messages.length && excess > 0; i++) {
    const m = messages[i]!;
    if (typeof m.content === 'string' || countMarks(m.content) === 0) continue;
    const content = m.content.map((b) => {
      if (excess <= 0 || !(b as Marked).cache_control) return b;
      excess--;
      return unmark(b);
    });
    messages[i] = { ...m, content };
  }
  return messages;
}

function mark<B extends object>(b: B): B {
  return { ...b, cache_control: EPHEMERAL };
}

function unmark<B extends object>(b: B): B {
  const { cache_control: _dropped, ...rest } = b as B & Marked;
  return rest as B;
}

function countMarks(items: readonly object[]): number {
  return items.filter((b) => (b as Marked).cache_control).length;
}
