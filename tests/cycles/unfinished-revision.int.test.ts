// A revision that does not finish leaves the done version it was to revise current, even when
// its run had already replaced it with a tool write (write_file) and then ended with no text of
// its own: failed for good (a permanent model error), or stopped at its token cap. Its draft goes
// to the history. Real processes (planner, reflector, a research worker) with the real SDK
// against the local Messages-API server.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DEFAULT_ROLES } from '../../shared/agent/roles.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  apiError,
  type HandlerResult,
  type MessageReply,
  type MessagesApiServer,
  startMessagesApiServer,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { cycleOf, json, research, type Scenario, scenarioHandler } from './harness.ts';

const DONE = 'GOOD DONE VERSION of notes';
const DRAFT = 'HALF-DONE DRAFT';
const toRevise = (task: string) => /^To revise[^:]*: (.*)$/m.exec(task)?.[1]?.split(', ') ?? [];
const costly = (reply: MessageReply): MessageReply => ({
  ...reply,
  usage: { input_tokens: 800, output_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
});

/** Cycle 1 writes notes.md; its reflection asks to revise it; the revising run writes a draft, then `rest`. */
function revising(tag: string, cap: number | undefined, rest: () => HandlerResult): Scenario {
  return (body, role, task) => {
    if (role === 'planner') {
      if (task.includes('Prior plan: (none)')) return json({ subtasks: [research(tag, 'notes.md')] });
      const extra = { instruction: `${tag} REVISE-NOW`, ...(cap ? { token_cap: cap } : {}) };
      return json({ subtasks: toRevise(task).map((n) => research(tag, n, extra)) });
    }
    if (role === 'reflector')
      return json(
        cycleOf(task) === 1
          ? { decision: 'replan', reason: 'too thin', revise: ['notes.md'] }
          : { decision: 'escalate', reason: 'a human looks' },
      );
    if (!task.includes('REVISE-NOW')) return text(DONE);
    if (body.messages.length === 1) return costly(toolUse('write_file', { name: 'notes.md', content: DRAFT }));
    return rest();
  };
}

const handler = scenarioHandler({
  '[revcrash]': revising('[revcrash]', undefined, () => apiError(400, 'a permanent error')),
  '[revcap]': revising('[revcap]', 2000, () => costly(toolUse('list_files', {}))),
});

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler });
  const config = join(tempDir('deepq-revision-'), 'deepq.json');
  const roles = DEFAULT_ROLES.map((r) =>
    r.name === 'research-specialist' ? { ...r, tools: [...(r.tools ?? []), 'write_file'] } : r,
  );
  writeFileSync(config, JSON.stringify({ roles }));
  fleet = await startFleet(redis.url, anthropicEnv(server, { DEEPQ_CONFIG: config }), {
    roles: ['research-specialist'],
  });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

async function revisedNotes(tag: string) {
  const goalId = await fleet.client.enqueue({ goal: `${tag} write notes` });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'awaiting_human', g.reason ?? '');
  assert.equal(g.step, 2, 'the revision ran in cycle 2');
  const [notes] = (await fleet.client.vfs.index(goalId)).filter((f) => f.name === 'notes.md');
  const history = await fleet.client.vfs.history(goalId, 'notes.md');
  return { g, notes: notes!, content: await fleet.client.read(goalId, 'notes.md'), history };
}

test('a revision that fails for good after writing a draft leaves the done version current', async () => {
  const { g, notes, content, history } = await revisedNotes('[revcrash]');
  assert.equal(g.outcomes[0]?.status, 'failed');
  assert.deepEqual([notes.status, notes.step, content], ['done', 1, DONE]);
  assert.deepEqual(
    history.map((h) => [h.status, h.content]),
    [['failed', DRAFT]],
  );
});

test('a revision stopped at its token cap with no text leaves the done version current', async () => {
  const { g, notes, content, history } = await revisedNotes('[revcap]');
  assert.equal(g.outcomes[0]?.status, 'partial');
  assert.deepEqual([notes.status, notes.step, content], ['done', 1, DONE]);
  assert.deepEqual(
    history.map((h) => [h.status, h.content]),
    [['active', DRAFT]],
  );
});
