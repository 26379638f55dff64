// A subagent job's checkpoint, stored in parts so that a run stores each message once: in the
// goal's checkpoints hash, a head `<jobId>#h` (the JobCheckpoint without its messages), one field
// per message `<jobId>#<i>`, and `<jobId>#n` (lua/includes/checkpointWrite.lua). A run stores its
// checkpoint after every tool call; as one JSON that was a copy of its conversation per call,
// O(n²) bytes over a run. The writer sends only the messages new or replaced since its last
// write (the agent loop never changes a message in place: it appends, or replaces the last
// one); the script refuses a write that goes on from one that is not the one stored, and the
// writer's next write is then whole. A checkpoint after a tool call holds its turn's tool uses,
// which are the last message's: the head says so (`usesOfLast`) instead of holding them again.
import { randomBytes } from 'node:crypto';
import type { Message, ToolUseBlock } from '../agent/providers/types.ts';
import type { JobCheckpoint } from './approvals.ts';

/** A checkpoint's head as stored: without its messages, and maybe without its uses. */
type Head = JobCheckpoint & { usesOfLast?: true };

/** One write, as lua/includes/checkpointWrite.lua reads it. */
export type CheckpointArgs = [after: string, write: string, base: number, head: string, ...messages: string[]];

/** Writes one job run's checkpoints, each after the first sending only what changed. */
export class CheckpointWriter {
  /** The messages the last write stored, by identity, and which write that was. */
  private stored: readonly Message[] = [];
  private last = '';
  private writes = 0;
  private readonly run = randomBytes(6).toString('base64url');

  /** The next write; `whole` sends every message (a write that need not follow the last one). */
  next(cp: JobCheckpoint, whole = false): CheckpointArgs {
    const messages = cp.agent.messages;
    let base = whole || !this.last ? 0 : Math.min(this.stored.length, messages.length);
    for (let i = 0; i < base; i++) {
      if (messages[i] !== this.stored[i]) base = i;
    }
    const after = base > 0 ? this.last : '';
    this.stored = [...messages];
    this.last = `${this.run}.${++this.writes}`;
    const head: Head = { ...cp, agent: { ...cp.agent, messages: [] } };
    if (areLastUses(cp.agent.uses, messages))
      Object.assign(head, { usesOfLast: true, agent: { ...head.agent, uses: [] } });
    return [after, this.last, base, JSON.stringify(head), ...messages.slice(base).map((m) => JSON.stringify(m))];
  }

  /** The last write was not stored (refused, or its reply lost): the next one sends everything. */
  unstored(): void {
    this.stored = [];
    this.last = '';
  }

  /** A write's request: failed, it may not have landed, and the next write sends everything. */
  sent<T>(request: Promise<T>): Promise<T> {
    return request.catch((err) => {
      this.unstored();
      throw err;
    });
  }
}

/** Where a checkpoint's head is (a checkpoint at `<jobId>` itself was stored whole by an earlier version). */
export function checkpointHeadField(jobId: string): string {
  return `${jobId}#h`;
}

/** A checkpoint as lua/checkpointRead.lua returns it (its head, then its messages); null for none. */
export function checkpointOfReply(reply: (string | null)[] | null): JobCheckpoint | null {
  const [head, ...parts] = reply ?? [];
  if (!head) return null;
  const { usesOfLast, ...cp } = JSON.parse(head) as Head;
  // A head written whole holds its messages itself.
  if (parts.length === 0) return cp;
  if (parts.some((m) => m === null)) return null;
  const messages = parts.map((m) => JSON.parse(m!) as Message);
  const uses = usesOfLast ? toolUsesOf(messages[messages.length - 1]) : cp.agent.uses;
  return { ...cp, agent: { ...cp.agent, messages, uses } };
}

/** A head that leaves its uses to the last message: its full checkpoint must be read for them. */
export function usesInMessages(head: JobCheckpoint): boolean {
  return (head as Head).usesOfLast === true;
}

function toolUsesOf(m: Message | undefined): ToolUseBlock[] {
  if (!m || typeof m.content === 'string') return [];
  return m.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
}

/** Are these the tool uses of the last message, the same objects in the same order? */
function areLastUses(uses: ToolUseBlock[], messages: readonly Message[]): boolean {
  const last = toolUsesOf(messages[messages.length - 1]);
  return uses.length > 0 && uses.length === last.length && uses.every((u, i) => u === last[i]);
}
