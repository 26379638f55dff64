// A job's checkpoint stored in parts (shared/goal/checkpoints.ts): each write after the first
// sends only the messages that changed, reads back whole, and a write that goes on from one
// that is not stored (lost, refused, another run's) is refused, the writer's next write whole.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message, ToolUseBlock } from '../../shared/agent/providers/types.ts';
import type { JobCheckpoint } from '../../shared/goal/approvals.ts';
import { type CheckpointArgs, CheckpointWriter } from '../../shared/goal/checkpoints.ts';
import { runScript } from '../../shared/runtime/scripts.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (v) => {
  t = v;
});

const JOB = 'g:1:0';
const use = (n: number): ToolUseBlock => ({ type: 'tool_use', id: `toolu_${n}`, name: 'write_file', input: { n } });
const assistant = (n: number): Message => ({
  role: 'assistant',
  content: [{ type: 'text', text: `turn ${n}` }, use(n)],
});
const results = (n: number): Message => ({
  role: 'user',
  content: [{ type: 'tool_result', tool_use_id: `toolu_${n}`, content: `wrote ${n}` }],
});

/** The checkpoint after the tool call of turn `turns - 1`: its uses are the last message's. */
function checkpointAt(messages: Message[]): JobCheckpoint {
  const last = messages[messages.length - 1]!;
  const uses = typeof last.content === 'string' ? [] : last.content.filter((b) => b.type === 'tool_use');
  const agent = { messages, turns: 1, phaseTurns: 1, contractRetry: false, uses: uses as ToolUseBlock[], awaiting: [] };
  return { threadId: 'th', startedAt: 1, calls: [], agent, running: true };
}

const save = async (goalId: string, write: CheckpointArgs) =>
  runScript(t.rt.redis, 'checkpointSave', [t.rt.goals.keys.checkpoints(goalId)], [JOB, ...write]);
const fields = async (goalId: string) => (await t.rt.redis.hkeys(t.rt.goals.keys.checkpoints(goalId))).sort();
/** A write's messages and what it goes on from: [base, how many messages it sends]. */
const sends = (w: CheckpointArgs) => [w[2], w.length - 4];

test('each write sends only what changed and the checkpoint reads back whole', async () => {
  const goalId = await t.newGoal();
  const writer = new CheckpointWriter();
  const messages: Message[] = [{ role: 'user', content: 'the task' }, assistant(0)];
  const first = writer.next(checkpointAt([...messages]));
  assert.deepEqual(sends(first), [0, 2]);
  assert.equal(await save(goalId, first), 1);
  messages.push(results(0), assistant(1));
  const second = writer.next(checkpointAt([...messages]));
  assert.deepEqual(sends(second), [2, 2], 'the two new messages alone');
  assert.equal(JSON.parse(second[3]).agent.uses.length, 0, 'the uses are the last message: not sent twice');
  assert.equal(await save(goalId, second), 1);
  assert.deepEqual(await t.rt.approvals.checkpoint(goalId, JOB), JSON.parse(JSON.stringify(checkpointAt(messages))));
  // The near-cap notice replaces the last message: it is sent again, and read back replaced.
  messages[3] = { ...messages[3]!, content: 'replaced' };
  const third = writer.next(checkpointAt([...messages]));
  assert.deepEqual(sends(third), [3, 1]);
  assert.equal(await save(goalId, third), 1);
  assert.equal((await t.rt.approvals.checkpoint(goalId, JOB))?.agent.messages[3]?.content, 'replaced');
  await t.rt.approvals.clearCheckpoint(goalId, JOB);
  assert.deepEqual(await fields(goalId), [], 'cleared: head, count and messages');
  assert.equal(await t.rt.approvals.checkpoint(goalId, JOB), null);
});

test('a write after one that was not stored is refused, and the next one is whole', async () => {
  const goalId = await t.newGoal();
  const writer = new CheckpointWriter();
  const messages: Message[] = [{ role: 'user', content: 'the task' }, assistant(0)];
  assert.equal(await save(goalId, writer.next(checkpointAt([...messages]))), 1);
  messages.push(results(0), assistant(1));
  writer.next(checkpointAt([...messages])); // lost on its way
  messages.push(results(1), assistant(2));
  const after = writer.next(checkpointAt([...messages]));
  assert.deepEqual(sends(after), [4, 2]);
  assert.equal(await save(goalId, after), 0, 'it would leave messages 2 and 3 out');
  assert.equal((await t.rt.approvals.checkpoint(goalId, JOB))?.agent.messages.length, 2, 'the stored one stands');
  writer.unstored();
  assert.equal(await save(goalId, writer.next(checkpointAt([...messages]))), 1);
  assert.equal((await t.rt.approvals.checkpoint(goalId, JOB))?.agent.messages.length, 6);
  // Another run of the job (a new writer) cannot go on from this run's writes either.
  const other = new CheckpointWriter();
  const shorter = messages.slice(0, 2);
  assert.equal(await save(goalId, other.next(checkpointAt(shorter))), 1, 'a whole write always lands');
  assert.deepEqual(
    await fields(goalId),
    [`${JOB}#0`, `${JOB}#1`, `${JOB}#h`, `${JOB}#n`],
    'the longer one left no messages',
  );
  assert.equal(await save(goalId, writer.next(checkpointAt([...messages, results(2)]))), 0);
});

test("a tool call's checkpoint is stored only under the job's lock; a refused one makes the next whole", async () => {
  const goalId = await t.newGoal();
  const lock = { key: `${t.rt.goals.keys.goal(goalId)}:lock`, token: 'the-run' };
  await t.rt.redis.set(lock.key, 'another-run');
  const writer = new CheckpointWriter();
  const event = { type: 'tool_called' as const, step: 1, index: 0, role: 'critic', threadId: 'th', tool: 'write_file' };
  const messages: Message[] = [{ role: 'user', content: 'the task' }, assistant(0)];
  const progress = (m: Message[]) => ({
    jobId: JOB,
    checkpoint: writer.next(checkpointAt([...m])),
    lock,
    unstored: () => writer.unstored(),
  });
  await t.rt.goals.toolCalled(goalId, { ...event, ms: 1, ok: true }, undefined, progress(messages));
  assert.equal(await t.rt.approvals.checkpoint(goalId, JOB), null, "stored under another run's lock");
  await t.rt.redis.set(lock.key, lock.token);
  messages.push(results(0), assistant(1));
  const next = progress(messages);
  assert.deepEqual(sends(next.checkpoint), [0, 4], 'the refused write is sent again, whole');
  await t.rt.goals.toolCalled(goalId, { ...event, ms: 1, ok: true }, undefined, next);
  assert.equal((await t.rt.approvals.checkpoint(goalId, JOB))?.agent.messages.length, 4);
});

test('a checkpoint an earlier version stored whole reads back; that version finds none stored in parts', async () => {
  const goalId = await t.newGoal();
  const hash = t.rt.goals.keys.checkpoints(goalId);
  const messages: Message[] = [{ role: 'user', content: 'the task' }, assistant(0)];
  const cp = checkpointAt(messages);
  await t.rt.redis.hset(hash, JOB, JSON.stringify(cp));
  assert.deepEqual(await t.rt.approvals.checkpoint(goalId, JOB), JSON.parse(JSON.stringify(cp)));
  await t.rt.approvals.clearCheckpoint(goalId, JOB);
  assert.deepEqual(await fields(goalId), []);
  // A process of the earlier version (rolling out) reads `<jobId>` only: it finds no checkpoint
  // and starts the job over, never a head without its messages.
  await t.rt.redis.hset(hash, JOB, JSON.stringify(cp));
  assert.equal(await save(goalId, new CheckpointWriter().next(checkpointAt([...messages, results(0)]))), 1);
  assert.equal(await t.rt.redis.hget(hash, JOB), null, 'the whole one it replaced is gone');
  assert.equal((await t.rt.approvals.checkpoint(goalId, JOB))?.agent.messages.length, 3);
});
