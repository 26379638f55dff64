// End to end across real processes (planner, reflector, and a worker for a role with run_code
// and run_tests), the real Anthropic SDK against the local Messages-API server, real bubblewrap:
// - a code-writer writes code and a test, runs the test in the sandbox, sees it fail, edits,
//   reruns and passes; the tool results on the wire hold the failing then the passing output;
// - the worker's secrets (its API key, REDIS_URL) never reach a sandboxed program;
// - cancelling the goal kills a running sandbox at once; so does the goal's time budget
//   running out (the reflector's deadline goes through the same cancel channel).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  FAKE_API_KEY,
  firstUserText,
  goalOf,
  type Handler,
  type MessageReply,
  type MessagesApiServer,
  type MessagesBody,
  type RecordedRequest,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
  type WireBlock,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { marker, processesWith, until, writeSandboxConfig } from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

const BUGGY = 'def add(a, b):\n    return a - b\n';
const TEST =
  'import unittest\nfrom app import add\n\n\nclass AddTest(unittest.TestCase):\n' +
  '    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == "__main__":\n' +
  '    unittest.main()\n';
const SLEEP = marker('sandboxsleep');

function lastResults(body: MessagesBody): WireToolResult[] {
  const m = body.messages.at(-1);
  if (!m || typeof m.content === 'string') return [];
  return (m.content as WireBlock[]).filter((b): b is WireToolResult => b.type === 'tool_result');
}
const resultText = (body: MessagesBody) =>
  lastResults(body)
    .map((r) => String(r.content))
    .join('\n');

/** The code-writer: each answer decided by what the last tool results say. */
function fixLoop(body: MessagesBody): MessageReply {
  const last = resultText(body);
  const files = ['app.py', 'test_app.py'];
  if (body.messages.length === 1) {
    return {
      content: [
        { type: 'tool_use', id: 'toolu_w1', name: 'write_file', input: { name: 'app.py', content: BUGGY } },
        { type: 'tool_use', id: 'toolu_w2', name: 'write_file', input: { name: 'test_app.py', content: TEST } },
      ],
      stop_reason: 'tool_use',
    };
  }
  if (/^wrote app\.py/m.test(last)) {
    return toolUse('run_code', { language: 'shell', code: 'python3 -m unittest -v', files }, { id: 'toolu_run1' });
  }
  if (/FAILED \(failures=1\)/.test(last)) {
    const edit = { name: 'app.py', old_string: 'return a - b', new_string: 'return a + b' };
    return toolUse('edit_file', edit, { id: 'toolu_edit' });
  }
  if (/^edited app\.py/.test(last)) return toolUse('run_tests', { files }, { id: 'toolu_run2' });
  if (/^exit 0\n/.test(last) && /\nOK\n?/.test(last)) return text('The tests pass: add(2, 3) == 5.');
  return text(`unexpected tool result: ${last.slice(0, 500)}`);
}

const scripts: Record<string, (body: MessagesBody) => MessageReply> = {
  fix: fixLoop,
  env: (body) =>
    body.messages.length === 1
      ? toolUse('run_code', {
          language: 'shell',
          code: 'env; for f in /proc/[0-9]*/environ; do echo "$f"; tr "\\0" "\\n" < "$f"; done',
        })
      : text('looked at the environment'),
  sleep: (body) =>
    body.messages.length === 1
      ? toolUse('run_code', { language: 'shell', code: `python3 -c 'import time; time.sleep(60)' ${SLEEP}` })
      : text('should not get here: the goal ended'),
};

/** The planner plans one coder subtask for the goal's scenario; the reflector ends; the coder plays its script. */
const handler: Handler = (body) => {
  const sys = systemText(body);
  if (sys.startsWith('You are the planner')) {
    const scenario = /^scenario (\S+)$/.exec(goalOf(body))?.[1] ?? 'none';
    const subtask = { role: 'coder', instruction: `scenario=${scenario}`, expected_artifact: `${scenario}.md` };
    return text(JSON.stringify({ subtasks: [{ ...subtask, read_files: [] }] }));
  }
  if (sys.startsWith('You are the reflection node')) return text('{"decision":"end","reason":"the scenario ran"}');
  const scenario = /scenario=(\S+)/.exec(firstUserText(body))?.[1] ?? '';
  return scripts[scenario]?.(body) ?? text(`no script for ${scenario}`);
};

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler });
  const config = writeSandboxConfig([
    { name: 'coder', tools: ['read_file', 'write_file', 'edit_file', 'list_files', 'run_code', 'run_tests'] },
  ]);
  fleet = await startFleet(redis.url, anthropicEnv(server, { DEEPQ_CONFIG: config }), { roles: ['coder'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

function coderRequests(scenario: string): RecordedRequest[] {
  return server.requests.filter(
    (r) =>
      systemText(r.body ?? {}).startsWith('You are the sandbox test agent coder') &&
      firstUserText(r.body).includes(`scenario=${scenario}`),
  );
}

/** The text of the tool_result answering `toolUseId`, as the model received it. */
function resultOnTheWire(reqs: RecordedRequest[], toolUseId: string): string {
  for (const r of reqs) {
    const hit = lastResults(r.body).find((b) => b.tool_use_id === toolUseId);
    if (hit) return String(hit.content);
  }
  throw new Error(`no tool_result for ${toolUseId} on the wire`);
}

async function workerMetric(name: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${fleet.ports.get('worker-coder')}/metrics`);
  return (await res.text())
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');
}

test('a code-writer writes code and a test, sees the test fail in the sandbox, fixes it, and it passes', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'scenario fix' });
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
  assert.equal(g.status, 'done');
  assert.equal(await fleet.client.read(goalId, 'fix.md'), 'The tests pass: add(2, 3) == 5.');
  assert.equal(await fleet.client.read(goalId, 'app.py'), 'def add(a, b):\n    return a + b\n');

  const reqs = coderRequests('fix');
  assert.equal(reqs.length, 5, 'write, run (fails), edit, run (passes), answer');
  const failing = resultOnTheWire(reqs, 'toolu_run1');
  assert.match(failing, /^exit 1\nrun_code: shell, [\d.]+ s, sandbox bwrap\n/);
  assert.match(failing, /test_add \(test_app\.AddTest(\.test_add)?\) \.\.\. FAIL/);
  assert.match(failing, /AssertionError: -1 != 5/);
  assert.match(failing, /FAILED \(failures=1\)/);
  const passing = resultOnTheWire(reqs, 'toolu_run2');
  assert.match(passing, /^exit 0\nrun_tests: shell, [\d.]+ s, sandbox bwrap\n/);
  assert.match(passing, /test_add \(test_app\.AddTest(\.test_add)?\) \.\.\. ok/);
  assert.match(passing, /Ran 1 test in [\d.]+s\n\nOK/);
  // The runs wrote nothing: no __pycache__ (bytecode off), nothing to list.
  assert.match(passing, /--- files created, changed or deleted: none ---/);

  const runs = await workerMetric('deepq_sandbox_runs_total');
  assert.match(runs, /^deepq_sandbox_runs_total\{[^}]*role="coder",outcome="nonzero_exit"[^}]*\} 1$/m);
  assert.match(runs, /^deepq_sandbox_runs_total\{[^}]*role="coder",outcome="ok"[^}]*\} 1$/m);
  assert.match(await workerMetric('deepq_sandbox_seconds_count'), /\{[^}]*role="coder"[^}]*\} 2$/);
});

test("the worker's API key and REDIS_URL never reach the sandboxed program", async () => {
  const goalId = await fleet.client.enqueue({ goal: 'scenario env' });
  assert.equal((await fleet.client.waitFor(goalId, { timeoutMs: 60_000 })).status, 'done');
  const reqs = coderRequests('env');
  const seen = String(lastResults(reqs.at(-1)!.body)[0]?.content);
  assert.match(seen, /^exit 0\n/);
  assert.match(seen, /\/proc\/1\/environ/);
  assert.equal(fleet.env.ANTHROPIC_API_KEY, FAKE_API_KEY, 'the worker has a key');
  assert.ok(!seen.includes(FAKE_API_KEY), 'no API key');
  assert.ok(!seen.includes(redis.url) && !seen.includes('REDIS_URL'), 'no REDIS_URL');
  assert.ok(!seen.includes(String(fleet.env.DEEPQ_PREFIX)), 'nothing else of the worker env either');
});

test('cancelling the goal kills the running sandbox at once', async () => {
  const goalId = await fleet.client.enqueue({ goal: 'scenario sleep' });
  await until(() => processesWith(SLEEP).length > 0, 30_000);
  const cancelledAt = Date.now();
  await fleet.client.cancel(goalId);
  await until(() => processesWith(SLEEP).length === 0, 5000);
  const ms = Date.now() - cancelledAt;
  assert.ok(ms < 1500, `the sandbox was gone ${ms} ms after the cancel`);
  assert.equal((await fleet.client.get(goalId)).status, 'cancelled');
  // Counted once the killed tree is reaped and the worker's tool call returns: a moment after.
  const cancelled = /^deepq_sandbox_runs_total\{[^}]*role="coder",outcome="error"[^}]*\} 1$/m;
  await until(async () => cancelled.test(await workerMetric('deepq_sandbox_runs_total')), 5000);
});

test("the goal's time budget reaches a running sandbox: killed when maxSeconds runs out", async () => {
  const goalId = await fleet.client.enqueue({ goal: 'scenario sleep', budgets: { maxSeconds: 5 } });
  const createdAt = (await fleet.client.get(goalId)).createdAt;
  await until(() => processesWith(SLEEP).length > 0, 30_000);
  assert.ok(Date.now() < createdAt + 5000, 'the sandbox started inside the budget');
  await until(() => processesWith(SLEEP).length === 0, 10_000);
  const late = Date.now() - (createdAt + 5000);
  assert.ok(late < 2000, `the sandbox was gone ${late} ms after the budget ran out`);
  const g = await fleet.client.get(goalId);
  assert.equal(g.status, 'budget_exceeded');
  assert.match(String(g.reason ?? ''), /time budget exceeded/);
  // Counted once the killed tree is reaped and the worker's tool call returns: a moment after.
  const cancelled = /^deepq_sandbox_runs_total\{[^}]*role="coder",outcome="error"[^}]*\} 2$/m;
  await until(async () => cancelled.test(await workerMetric('deepq_sandbox_runs_total')), 5000);
});
