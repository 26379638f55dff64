// Each agent run's messages, kept under its thread id with a TTL for debugging; never fed
// to another agent.
import { randomBytes } from 'node:crypto';
import type { Message } from './providers/types.ts';
import type { Runtime } from './runtime.ts';
import { goalIdFromThreadId } from './keys.ts';

export function shortId(): string {
  return randomBytes(4).toString('hex');
}

export async function saveTranscript(rt: Pick<Runtime, 'redis' | 'goals' | 'cfg'>, goalId: string, threadId: string, role: string, messages: Message[]): Promise<void> {
  const key = rt.goals.keys.transcript(goalId, threadId);
  await rt.redis.set(key, JSON.stringify({ threadId, role, savedAt: Date.now(), messages }), 'EX', rt.cfg.transcriptTtlSeconds);
}

export async function loadTranscript(rt: Pick<Runtime, 'redis' | 'goals'>, threadId: string): Promise<{ threadId: string; role: string; savedAt: number; messages: Message[] } | null> {
  const goalId = goalIdFromThreadId(threadId);
  if (!goalId) return null;
  const raw = await rt.redis.get(rt.goals.keys.transcript(goalId, threadId));
  return raw ? JSON.parse(raw) : null;
}
