// Thread ids (seed 003): every agent run gets `goal-<goalId>--<role>-<short>`; its
// transcript is stored under that id with a TTL, shown by `deepq transcript <threadId>`,
// and never fed to another agent.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { shortId } from '../../shared/agent/transcripts.ts';
import { goalIdFromThreadId, threadIdFor } from '../../shared/goal/keys.ts';
import { anthropicEnv, useMessagesApi } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import {
  linkThreads,
  type MessagesApiServer,
  roleOf,
  unmarkedMessages,
  type WireBlock,
  type WireToolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
let server: MessagesApiServer;
useMessagesApi(redis, (s) => (server = s));

test('the thread id shape: goal-<goalId>--<role>-<short>', () => {
  const short = shortId();
  assert.match(short, /^[0-9a-f]{8}$/);
  assert.notEqual(shortId(), short);
  const id = threadIdFor('abc123def456', 'code-writer', short);
  assert.equal(id, `goal-abc123def456--code-writer-${short}`);
  assert.equal(goalIdFromThreadId(id), 'abc123def456');
  assert.equal(goalIdFromThreadId('goal-../x--planner-1'), null);
  assert.equal(goalIdFromThreadId('nonsense'), null);
});

test(
  'each agent run of a goal gets its own thread id, transcript with a TTL, ' + 'shown by `deepq transcript`',
  async (t) => {
    const dir = tempDir('deepq-cfg-');
    const cfgFile = join(dir, 'deepq.json');
    writeFileSync(cfgFile, JSON.stringify({ transcriptTtlSeconds: 900 }));
    const fleet: Fleet = await startFleet(redis.url, anthropicEnv(server, { DEEPQ_CONFIG: cfgFile }));
    t.after(() => fleet.stop());
    assert.equal(fleet.cfg.transcriptTtlSeconds, 900);
    const goalId = await fleet.client.enqueue({ goal: 'Write a sorting function' });
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.equal(g.status, 'done');

    // Every run announced its thread id on the goal's timeline.
    const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
    const runs = new Map<string, string>(); // threadId → role
    for (const e of events) {
      if (!('threadId' in e) || !e.threadId) continue;
      const role = e.type === 'planned' ? 'planner' : e.type === 'reflected' ? 'reflector' : e.role;
      runs.set(e.threadId, role);
    }
    const roles = [...runs.values()].sort();
    assert.deepEqual(
      roles,
      ['code-writer', 'critic', 'planner', 'planner', 'reflector', 'reflector', 'research-specialist'],
      'one thread per agent run',
    );
    for (const [threadId, role] of runs) {
      assert.match(threadId, new RegExp(`^goal-${goalId}--${role}-[0-9a-f]{8}$`));
      assert.equal(goalIdFromThreadId(threadId), goalId);
      // The transcript is kept under the thread id, with the configured TTL.
      const key = `${fleet.cfg.prefix}:goal:${goalId}:thread:${threadId}`;
      const ttl = await redis.client.ttl(key);
      assert.ok(ttl > 0 && ttl <= 900, `transcript ${key} has TTL ${ttl}`);
    }

    // `deepq transcript <goalId>` lists the goal's runs: every thread id, newest first.
    const listed = await runCli(['transcript', goalId], fleet.env);
    assert.equal(listed.code, 0, listed.stderr);
    const lines = listed.stdout.trim().split('\n');
    assert.deepEqual(lines.map((l) => l.split(/\s+/)[0]).sort(), [...runs.keys()].sort());
    const times = lines.map((l) => Date.parse(l.split(/\s+/)[1]!));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
      'newest first',
    );

    // `deepq transcript` shows a subagent's whole conversation: the messages the model got
    // (as captured on the wire) and its final answer.
    const [codeThread] = [...runs].find(([, role]) => role === 'code-writer')!;
    const out = await runCli(['transcript', codeThread], fleet.env);
    assert.equal(out.code, 0, out.stderr);
    const tr = JSON.parse(out.stdout) as {
      threadId: string;
      role: string;
      messages: { role: string; content: string | WireBlock[] }[];
    };
    assert.equal(tr.threadId, codeThread);
    assert.equal(tr.role, 'code-writer');
    const { threads, problems } = linkThreads(server.requests);
    assert.deepEqual(problems, []);
    const wire = threads.find(
      (th) =>
        roleOf(th[0]!.body) === 'code' &&
        JSON.stringify(unmarkedMessages(th[0]!.body.messages)[0]) === JSON.stringify(tr.messages[0]),
    );
    assert.ok(wire, 'the transcript matches a conversation seen on the wire');
    const last = wire[wire.length - 1]!;
    const answer = (last.response!.body as { content: WireBlock[] }).content;
    assert.deepEqual(tr.messages, [...unmarkedMessages(last.body.messages), { role: 'assistant', content: answer }]);

    // Unknown or malformed thread ids: a clear error, no stack trace.
    for (const bad of [`goal-${goalId}--critic-00000000`, 'not-a-thread']) {
      const r = await runCli(['transcript', bad], { ...fleet.env, DEEPQ_MAX_TOKEN: '5' });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /no transcript for thread id/);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
      // Through the CLI's shared connection, as every one-shot command (its lost-Redis guard too).
      assert.match(r.stderr, /ignoring DEEPQ_MAX_TOKEN \(did you mean DEEPQ_MAX_TOKENS\?\)/);
    }

    // Never fed to another agent: no request carries a thread id, planner and reflector get a
    // single fresh message, and each tool call id stays within its own conversation.
    for (const r of server.requests) {
      assert.ok(!r.rawBody.includes(`goal-${goalId}--`), `request #${r.index} carries a thread id`);
      if (['planner', 'reflector'].includes(roleOf(r.body))) assert.equal(r.body.messages.length, 1);
    }
    for (const th of threads) {
      const mine = new Set(th.map((r) => r.index));
      for (const r of th) {
        const ids = ((r.response?.body as { content?: WireBlock[] })?.content ?? [])
          .filter((b): b is WireToolUse => b.type === 'tool_use')
          .map((b) => b.id);
        for (const id of ids) {
          for (const other of server.requests)
            if (!mine.has(other.index))
              assert.ok(!other.rawBody.includes(id), `tool call ${id} leaked into request #${other.index}`);
        }
      }
    }
  },
);
