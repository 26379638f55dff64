// A subagent's run stores its checkpoint after each tool call. Its worker process SIGKILLed in
// the middle of the run, the job handed out again goes on from the last call done: no tool
// call runs twice, no model turn is asked again, the timeline shows the restart, and the
// finished job leaves no checkpoint behind. Each checkpoint sends only what the last one did
// not hold: a run's checkpoints add up to about its conversation, not a copy of it per call.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { subtaskJobId } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet, stopProcess } from '../../testing/fleet.ts';
import {
  firstUserText,
  type MessagesApiServer,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { monitorOf, useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import { goalFor, scriptedModel, writeConfig } from '../agent/mcp-harness.ts';

const ROLE = 'toolsmith';
/** Answers of the second turn so far, per scenario: the first is held while its worker dies. */
const secondTurns: Record<string, number> = {};
let releaseHeld: () => void = () => {};
const held = new Promise<void>((r) => {
  releaseHeld = r;
});

const firstTurn = (scenario: string) =>
  toolUse('write_file', { name: `${scenario}-notes.md`, content: 'notes\n' }, { text: 'first, notes' });

/** The long scenario: this many turns each writing a file this big, then the answer. */
const LONG_TURNS = 7;
const LONG_FILE_BYTES = 16_384;
const longFile = (turn: number) =>
  `${String(turn).padStart(4, '0')} ${'lorem ipsum '.repeat(2000)}`.slice(0, LONG_FILE_BYTES);

const model = scriptedModel({
  killed: async ({ turn }) => {
    if (turn === 0) return firstTurn('killed');
    if (++secondTurns.killed! === 1) await held; // its worker dies meanwhile
    return text('killed: the answer');
  },
  long: ({ turn }) =>
    turn < LONG_TURNS
      ? toolUse('write_file', { name: `long-${turn}.md`, content: longFile(turn) })
      : text('long: done'),
});

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  secondTurns.killed = 0;
  server = await startMessagesApiServer({ handler: model });
  const config = writeConfig({}, [{ name: ROLE, tools: ['write_file', 'list_files'] }]);
  const env = { DEEPQ_CONFIG: config, DEEPQ_LOCK_DURATION_MS: '3000', DEEPQ_STALLED_INTERVAL_MS: '1000' };
  fleet = await startFleet(redis.url, anthropicEnv(server, env), { roles: [ROLE] });
});
after(async () => {
  releaseHeld();
  await fleet?.stop();
  await server?.close();
});

/** The subagent's model requests of one scenario (answered or not): how many messages each sent. */
const turnsAsked = (scenario: string) =>
  server.requests
    .filter(
      (q) => systemText(q.body).includes(`agent ${ROLE}.`) && firstUserText(q.body).includes(`scenario=${scenario}`),
    )
    .map((q) => q.body.messages.length);

async function timeline(goalId: string): Promise<TimelineEvent[]> {
  return (await fleet.client.goals.events(goalId)).map((e) => e.event);
}

const checkpointOf = (goalId: string) => fleet.client.approvals.checkpoint(goalId, subtaskJobId(goalId, 1, 0));

test('SIGKILLed after a tool call, the job goes on from there: the call not run again, no turn asked again', {
  timeout: 60_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor(ROLE, 'killed') });
  await until(async () => secondTurns.killed === 1 || undefined, 30_000);
  const saved = (await checkpointOf(goalId))!;
  assert.equal(saved.running, true);
  assert.equal(saved.agent.results?.length, 1, 'the checkpoint holds the call done');
  await stopProcess(fleet.procs.find((p) => p.name === `worker-${ROLE}`)!, 'SIGKILL');
  await fleet.start(`worker-${ROLE}-2`, ['worker', '--role', ROLE]);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await fleet.client.read(goalId, 'killed.md'), 'killed: the answer');
  assert.equal(await fleet.client.read(goalId, 'killed-notes.md'), 'notes\n');
  // The first turn was asked once and its call ran once; the second asked again (its answer died).
  assert.deepEqual(turnsAsked('killed'), [1, 3, 3]);
  const events = await timeline(goalId);
  assert.equal(events.filter((e) => e.type === 'tool_called').length, 1, 'write_file ran again');
  const starts = events.filter((e) => e.type === 'subtask_started');
  assert.deepEqual(
    starts.map((e) => e.type === 'subtask_started' && [e.attempt, !!e.restarted, e.threadId]),
    [
      [1, false, saved.threadId],
      [1, true, saved.threadId],
    ],
  );
  assert.equal(await checkpointOf(goalId), null, 'a finished job left its checkpoint');
});

test("a run's checkpoints send each message once: their bytes add up to about the conversation", {
  timeout: 60_000,
}, async () => {
  const monitor = await monitorOf(redis.client);
  const writes: number[] = [];
  let goalId = '';
  // Scripts called on the checkpoints hash alone (checkpointSave, Read, Clear): none in a run that ends.
  let ownCalls = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const [cmd, key, ...rest] = args;
    const checkpoints = goalId && fleet.client.goals.keys.checkpoints(goalId);
    const script = ['evalsha', 'eval'].includes(cmd?.toLowerCase() ?? '');
    if (!source.includes('lua') && script && rest[0] === '1' && rest[1] === checkpoints) ownCalls++;
    if (cmd?.toLowerCase() !== 'hset' || !goalId || key !== fleet.client.goals.keys.checkpoints(goalId)) return;
    writes.push(rest.reduce((n, a) => n + Buffer.byteLength(a), 0));
  });
  try {
    goalId = await fleet.client.enqueue({ goal: goalFor(ROLE, 'long') });
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
    assert.equal(g.status, 'done', g.reason ?? '');
  } finally {
    await monitor.disconnect();
  }
  assert.equal(await fleet.client.read(goalId, `long-${LONG_TURNS - 1}.md`), longFile(LONG_TURNS - 1));
  assert.equal(writes.length, LONG_TURNS, 'one checkpoint after each tool call');
  const sent = writes.reduce((a, b) => a + b, 0);
  const written = LONG_TURNS * LONG_FILE_BYTES;
  assert.ok(sent > written, `the checkpoints hold the conversation (${sent} bytes sent)`);
  assert.ok(sent < 1.5 * written, `${sent} bytes of checkpoints for ${written} bytes of conversation`);
  const left = await redis.client.hkeys(fleet.client.goals.keys.checkpoints(goalId));
  assert.deepEqual(left, [], 'a finished job left parts of its checkpoint');
  assert.equal(ownCalls, 0, "the checkpoint went with the artifact's write, not in a call of its own");
});
