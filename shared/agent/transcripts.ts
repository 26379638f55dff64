// Each agent run's messages, kept under its thread id with a TTL for debugging; never fed
// to another agent.
import { randomUUID } from 'node:crypto';
import { goalIdFromThreadId } from '../goal/keys.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { runScript } from '../runtime/scripts.ts';
import type { Message } from './providers/types.ts';
import { cutChars } from './tools/paging.ts';

/** 8 hex characters (randomUUID draws from a buffered pool: no entropy read per call). */
export function shortId(): string {
  return randomUUID().slice(0, 8);
}

function elide(text: string, max: number): string {
  return text.length > max
    ? `${cutChars(text, max)}\n[... ${text.length - max} chars elided from the stored transcript ...]`
    : text;
}

/**
 * A transcript is a debugging copy, not state: each text block is capped, so artifacts and
 * read_files contents are not stored twice (P51).
 */
export function compactMessages(messages: Message[], maxChars: number): Message[] {
  return messages.map((m) => ({
    role: m.role,
    content:
      typeof m.content === 'string'
        ? elide(m.content, maxChars)
        : m.content.map((b) => {
            if (b.type === 'text') return { ...b, text: elide(b.text, maxChars) };
            if (b.type === 'tool_result') return { ...b, content: elide(String(b.content), maxChars) };
            // The signature and redacted data only matter to the API: a stored transcript is never sent.
            if (b.type === 'thinking') return { ...b, thinking: elide(b.thinking, maxChars), signature: '' };
            if (b.type === 'redacted_thinking') return { ...b, data: '' };
            const input = JSON.stringify(b.input ?? null);
            return input.length > maxChars ? { ...b, input: { elided: elide(input, maxChars) } } : b;
          }),
  }));
}

/** A transcript ready to store: lua/transcriptSave.lua's keys and arguments. */
export interface TranscriptWrite {
  /** The transcript's key, the goal's threads, the goal hash, the goal's token reservations. */
  keys: [string, string, string, string];
  args: (string | number)[];
}

/**
 * A run's messages as stored under its thread id with a TTL; at most `transcriptsPerGoal` are
 * kept per goal (the oldest go first), so a long goal's keys stay small. The run's last call's
 * usage, when given, is booked with it.
 */
export function transcriptWrite(
  rt: Pick<Runtime, 'goals' | 'cfg'>,
  goalId: string,
  threadId: string,
  role: string,
  messages: Message[],
  /** A model call's usage to book in the same script (usageArgs), if any. */
  usage: (string | number)[] = [],
): TranscriptWrite {
  const keys = rt.goals.keys;
  const now = Date.now();
  const body = JSON.stringify({
    threadId,
    role,
    savedAt: now,
    messages: compactMessages(messages, rt.cfg.transcriptMaxBlockChars),
  });
  return {
    keys: [keys.transcript(goalId, threadId), keys.threads(goalId), keys.goal(goalId), keys.reservations(goalId)],
    args: [
      body,
      rt.cfg.transcriptTtlSeconds,
      now,
      threadId,
      rt.cfg.transcriptsPerGoal,
      keys.transcript(goalId, ''),
      // The index lives with the goal's keys (their moves renew it), not per save.
      rt.cfg.goalKeyTtlSeconds,
    ].concat(usage),
  };
}

/** Stores a transcript on its own (lua/transcriptSave.lua). */
export async function storeTranscript(rt: Pick<Runtime, 'redis'>, w: TranscriptWrite): Promise<void> {
  await runScript(rt.redis, 'transcriptSave', w.keys, w.args);
}

/**
 * Runs a write that carries a run's transcript (a status move, an artifact write). When it
 * throws, or `refused` says it changed nothing, the transcript is stored on its own: the run
 * happened and spent tokens, so its record stays.
 */
export async function withTranscript<T>(
  rt: Pick<Runtime, 'redis'>,
  w: TranscriptWrite | undefined,
  write: () => Promise<T>,
  refused: (result: T) => boolean = () => false,
): Promise<T> {
  let result: T;
  try {
    result = await write();
  } catch (err) {
    if (w) await storeTranscript(rt, w);
    throw err;
  }
  if (w && refused(result)) await storeTranscript(rt, w);
  return result;
}

export function saveTranscript(
  rt: Pick<Runtime, 'redis' | 'goals' | 'cfg'>,
  goalId: string,
  threadId: string,
  role: string,
  messages: Message[],
  usage: (string | number)[] = [],
): Promise<void> {
  return storeTranscript(rt, transcriptWrite(rt, goalId, threadId, role, messages, usage));
}

/**
 * A goal's stored transcripts, newest first: their thread ids and when each was saved. The index
 * outlives its transcripts (it lives with the goal's keys): only those saved within the TTL.
 */
export async function storedThreads(
  rt: Pick<Runtime, 'redis' | 'goals'>,
  goalId: string,
  ttlSeconds: number,
  now = Date.now(),
): Promise<{ threadId: string; savedAt: number }[]> {
  const key = rt.goals.keys.threads(goalId);
  const flat = await rt.redis.zrevrangebyscore(key, '+inf', now - ttlSeconds * 1000, 'WITHSCORES');
  const out: { threadId: string; savedAt: number }[] = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ threadId: flat[i]!, savedAt: Number(flat[i + 1]) });
  return out;
}

export async function loadTranscript(
  rt: Pick<Runtime, 'redis' | 'goals'>,
  threadId: string,
): Promise<{ threadId: string; role: string; savedAt: number; messages: Message[] } | null> {
  const goalId = goalIdFromThreadId(threadId);
  if (!goalId) return null;
  const raw = await rt.redis.get(rt.goals.keys.transcript(goalId, threadId));
  return raw ? JSON.parse(raw) : null;
}
