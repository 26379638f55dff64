// End to end through a subagent job: the real worker code (processSubagentJob), the real agent
// loop and AnthropicProvider against a local Messages-API server, the real VirtualFs on a
// private Redis. The model greps the goal's files, edits one, makes up a tool, and calls a
// tool the worker's extraTools hook added. The files change, each call is one `tool_called`
// timeline event (no content) and one metric sample under a bounded tool label, and the
// transcript that `deepq transcript` shows holds the calls and their results.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job, Queue } from 'bullmq';
import { formatEventLine, TimelineView } from '../../cli/timeline.ts';
import { processSubagentJob } from '../../services/subagent-worker/subagent-job.ts';
import type { Tool, ToolScope } from '../../shared/agent/tools.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { useMessagesApi } from '../../testing/agent-harness.ts';
import { runCli } from '../../testing/fleet.ts';
import {
  type MessagesApiServer,
  type MessagesBody,
  text,
  type WireMessage,
  type WireToolResult,
  type WireToolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime & { env?: NodeJS.ProcessEnv };
useMessagesApi(
  redis,
  (s, r) => {
    server = s;
    rt = r;
  },
  { runtime: true },
);

const APP = 'def add(a, b):\n    return a - b  # TODO fix the sign\n';
const FIXED = '```python\ndef add(a, b):\n    return a + b\n```';

function uses(...calls: [id: string, name: string, input: unknown][]) {
  return {
    content: calls.map(([id, name, input]) => ({ type: 'tool_use' as const, id, name, input })),
    stop_reason: 'tool_use',
  };
}

/** The code-writer's model: look, fix, check, answer. */
function model(body: MessagesBody) {
  switch (body.messages.length) {
    case 1:
      return uses(
        ['toolu_grep1', 'grep', { pattern: 'todo', ignore_case: true, glob: 'src/**/*.py' }],
        ['toolu_list', 'list_files', { glob: '*.md' }],
      );
    case 3:
      return uses([
        'toolu_edit',
        'edit_file',
        { name: 'src/app.py', old_string: 'return a - b  # TODO fix the sign', new_string: 'return a + b' },
      ]);
    case 5:
      return uses(
        ['toolu_shell', 'run_shell', { cmd: 'pytest' }],
        ['toolu_lookup', 'kb__lookup', { q: 'add' }],
        ['toolu_grep2', 'grep', { pattern: 'TODO', glob: 'src/**/*.py' }],
      );
    default:
      return text(FIXED);
  }
}

function resultsOf(m: WireMessage | undefined): Map<string, WireToolResult> {
  assert.ok(m && Array.isArray(m.content));
  return new Map(
    (m.content as WireToolResult[]).filter((b) => b.type === 'tool_result').map((r) => [r.tool_use_id, r]),
  );
}

test('a subagent greps and edits through the real loop; tool_called events, metrics and transcript follow', {
  timeout: 90_000,
}, async () => {
  const goalId = newGoalId();
  await rt.goals.create(goalId, 'Fix the add function', {}, false);
  // Not finished work (a done artifact is changed only by a planned revision: vfs-tools.int.test.ts).
  const seed = { status: 'active' as const, step: 1, role: 'research-specialist', writer: 'seed' };
  await rt.vfs.write(goalId, 'src/app.py', APP, seed);
  await rt.vfs.write(goalId, 'src/lib/util.py', '# todo: nothing\n', seed);
  await rt.vfs.write(goalId, 'README.md', 'TODO in docs\n', seed);

  const scopes: ToolScope[] = [];
  const extraTools = (scope: ToolScope): Tool[] => {
    scopes.push(scope);
    return [
      {
        def: { name: 'kb__lookup', description: 'Look up', input_schema: { type: 'object', properties: {} } },
        label: 'mcp:kb/lookup',
        run: async () => `looked up for ${scope.goalId}`,
      },
      {
        // Same name as a built-in: the built-in is kept.
        def: { name: 'grep', description: 'impostor', input_schema: { type: 'object', properties: {} } },
        run: async () => 'IMPOSTOR',
      },
    ];
  };
  server.setHandler(model);
  const from = server.requests.length;
  const role = rt.cfg.roles.find((r) => r.name === 'code-writer')!;
  const data: SubagentJob = {
    goalId,
    step: 2,
    index: 1,
    role: 'code-writer',
    instruction: 'Fix the sign bug in src/app.py',
    expected_artifact: 'fix.py',
    read_files: [],
  };
  const job = { id: `${goalId}:2:1`, data, attemptsMade: 0 } as unknown as Job;
  const res = await processSubagentJob({ rt, role, queue: {} as Queue, extraTools }, job);
  assert.equal(res.status, 'done', res.notes ?? '');

  // The tools offered: the role's built-ins, then the extra one; the impostor is dropped.
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 4);
  assert.deepEqual(
    reqs[0]!.body.tools!.map((t) => [t.name, t.description === 'impostor']),
    [...role.tools.map((n) => [n, false]), ['kb__lookup', false]],
  );
  const scope = { goalId, step: 2, role: 'code-writer', threadId: res.threadId, writer: `${goalId}:2:1` };
  assert.deepEqual(scopes, [{ ...scope, artifact: 'fix.py' }]);

  // What the model got back, call by call.
  const r1 = resultsOf(reqs[1]!.body.messages[2]);
  assert.equal(
    r1.get('toolu_grep1')!.content,
    '[2 matches in 2 file(s) matching "src/**/*.py"]\nsrc/app.py:2:     return a - b  # TODO fix the sign\n' +
      'src/lib/util.py:1: # todo: nothing',
  );
  assert.equal(r1.get('toolu_list')!.content, '- README.md [active, 13 bytes]');
  const r2 = resultsOf(reqs[2]!.body.messages[4]);
  assert.match(
    String(r2.get('toolu_edit')!.content),
    /^edited src\/app\.py: replaced 1 occurrence \(\d+ bytes, version 2\)$/,
  );
  const r3 = resultsOf(reqs[3]!.body.messages[6]);
  assert.equal(r3.get('toolu_shell')!.is_error, true);
  assert.match(String(r3.get('toolu_shell')!.content), /^error: unknown tool "run_shell" \(available: /);
  assert.equal(r3.get('toolu_lookup')!.content, `looked up for ${goalId}`);
  assert.equal(
    r3.get('toolu_grep2')!.content,
    '[no matches for /TODO/ in 2 file(s) matching "src/**/*.py"]',
    'case-sensitive now, and the fixed line is gone',
  );

  // The files: edited in the goal, as a new version by this job; the artifact written.
  assert.equal(await rt.vfs.read(goalId, 'src/app.py'), 'def add(a, b):\n    return a + b\n');
  const e = (await rt.vfs.stat(goalId, 'src/app.py'))!;
  assert.deepEqual([e.version, e.writer, e.step, e.role], [2, `${goalId}:2:1`, 2, 'code-writer']);
  // Stored as the code the block holds: a file that runs, not one that starts with a fence line.
  assert.equal(await rt.vfs.read(goalId, 'fix.py'), 'def add(a, b):\n    return a + b\n');

  // One tool_called event per call, in order, with no input or output in it.
  const events = (await rt.goals.events(goalId)).map((x) => x.event);
  const calls = events.filter((x) => x.type === 'tool_called');
  assert.deepEqual(
    calls.map((c) => [c.tool, c.ok]),
    [
      ['grep', true],
      ['list_files', true],
      ['edit_file', true],
      ['unknown', false],
      ['mcp:kb/lookup', true],
      ['grep', true],
    ],
  );
  for (const c of calls) {
    assert.deepEqual(Object.keys(c).sort(), ['at', 'index', 'ms', 'ok', 'role', 'step', 'threadId', 'tool', 'type']);
    assert.deepEqual([c.step, c.index, c.role, c.threadId], [2, 1, 'code-writer', res.threadId]);
  }
  assert.ok(!JSON.stringify(calls).includes('run_shell') && !JSON.stringify(calls).includes('TODO'));
  const started = events.findIndex((x) => x.type === 'subtask_started');
  const finished = events.findIndex((x) => x.type === 'subtask_finished');
  assert.ok(started < events.indexOf(calls[0]!) && events.indexOf(calls[5]!) < finished, 'between start and finish');

  // `deepq watch`: a line per call, and a count per subtask in the tree.
  const t0 = events[0]!.at;
  assert.match(
    formatEventLine(calls[2]!, t0),
    /^ *\+\d+\.\d\ds cycle 2 \[1\] code-writer called edit_file \(ok, \d+ ms\)$/,
  );
  assert.match(formatEventLine(calls[3]!, t0), /cycle 2 \[1\] code-writer called unknown \(FAILED, \d+ ms\)$/);
  const view = new TimelineView();
  view.apply({
    type: 'dispatched',
    at: t0,
    step: 2,
    subtasks: [{ index: 1, role: 'code-writer', artifact: 'fix.py' }],
  });
  for (const x of events) view.apply(x);
  assert.match(view.render(), /\[1\] code-writer\s+fix\.py\s+done {2}\(6 tool calls, \d+\.\d\ds, \d+ B(, \d+ tok)?\)/);

  // The metrics: counted under the configured names; the invented one as `unknown`.
  const scrape = await rt.metrics.registry.metrics();
  const count = (tool: string, status: string) =>
    Number(
      new RegExp(
        `^deepq_tool_calls_total\\{role="code-writer",tool="${tool}",status="${status}"[^}]*\\} (\\d+)$`,
        'm',
      ).exec(scrape)?.[1] ?? 0,
    );
  assert.deepEqual(
    [count('grep', 'ok'), count('list_files', 'ok'), count('edit_file', 'ok'), count('unknown', 'error')],
    [2, 1, 1, 1],
  );
  assert.equal(count('mcp:kb/lookup', 'ok'), 1);
  assert.doesNotMatch(scrape, /run_shell/);
  assert.match(scrape, /^deepq_tool_latency_seconds_count\{[^}]*role="code-writer",tool="edit_file"[^}]*\} 1$/m);

  // The transcript keeps the calls and their results; `deepq transcript` shows them.
  const cli = await runCli(['transcript', res.threadId], { ...rt.env!, LOG_LEVEL: 'silent' });
  assert.equal(cli.code, 0, cli.stderr);
  const transcript = JSON.parse(cli.stdout) as { messages: WireMessage[] };
  const blocks = transcript.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  assert.deepEqual(
    blocks.filter((b): b is WireToolUse => b.type === 'tool_use').map((b) => b.name),
    ['grep', 'list_files', 'edit_file', 'run_shell', 'kb__lookup', 'grep'],
  );
  const stored = blocks.filter((b): b is WireToolResult => b.type === 'tool_result');
  assert.equal(stored.length, 6);
  assert.match(String(stored.find((b) => b.tool_use_id === 'toolu_edit')!.content), /^edited src\/app\.py/);
  assert.equal(stored.find((b) => b.tool_use_id === 'toolu_shell')!.is_error, true);
});
