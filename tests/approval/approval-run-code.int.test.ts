// The example shape, end to end: a role with `approval: [run_code]`. The model's
// run_code call pauses the subtask; `deepq approve` lets it run in the real bubblewrap
// sandbox, and its result reaches the model in the next request (the paused turn is not
// asked again). One fleet: planner, reflector, one worker of the role. A worker stopped while
// an approved call runs hands the job back with the decided turn intact: the next worker runs
// the call again instead of resuming from its cut-short result.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet, stopProcess } from '../../testing/fleet.ts';
import {
  type Handler,
  type MessagesApiServer,
  roleOf,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { pendingCall, resultsOf, until } from './harness.ts';

const PROMPT = 'You are the gated code runner.';
const CODE = 'print(6 * 7)';
/** Long enough for a shutdown's drain (1.5 s here) to cut it short. */
const SLOW_CODE = 'import time\ntime.sleep(6)\nprint(6 * 7)';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;

function writeConfig(): string {
  const runner = {
    name: 'runner',
    systemPrompt: PROMPT,
    tools: ['run_code'],
    approval: ['run_code'],
    middleware: ['logging', 'tokens', 'tier-routing', 'retry'],
    tier: 'LOW',
    maxTurns: 4,
    contract: 'text',
  };
  const file = join(tempDir('deepq-approval-run-'), 'deepq.json');
  // deepq needs 3 roles at least: two idle ones, whose workers this file never starts.
  const idle = (name: string) => ({ ...runner, name, tools: [], approval: [] });
  writeFileSync(file, JSON.stringify({ roles: [runner, idle('idle-a'), idle('idle-b')] }));
  return file;
}

/** Plans one runner subtask; the runner calls run_code once, then answers with what it got. */
const model: Handler = (body) => {
  const kind = roleOf(body);
  if (kind === 'planner') {
    const slow = /slowly/.test(JSON.stringify(body.messages));
    const instruction = slow ? 'compute 6*7 slowly' : 'compute 6*7';
    const subtasks = [{ role: 'runner', instruction, expected_artifact: 'answer.md', read_files: [] }];
    return text(JSON.stringify({ subtasks }));
  }
  if (kind === 'reflector') return text(JSON.stringify({ decision: 'end', reason: 'it ran' }));
  if (body.messages.length === 1) {
    const code = /slowly/.test(JSON.stringify(body.messages[0])) ? SLOW_CODE : CODE;
    return toolUse('run_code', { language: 'python', code }, { id: 'toolu_run' });
  }
  const [r] = resultsOf({ body } as Parameters<typeof resultsOf>[0]);
  return text(`got: ${r?.is_error ? 'error' : 'ok'}: ${r?.content}`);
};

/** The runner's requests for the slow goal's subtask, or for the other one. */
function runnerRequests(slow: boolean) {
  return server
    .messageRequests()
    .filter((q) => systemText(q.body).startsWith(PROMPT) && /slowly/.test(JSON.stringify(q.body.messages[0])) === slow);
}

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler: model });
  const env = anthropicEnv(server, { DEEPQ_CONFIG: writeConfig(), DEEPQ_DRAIN_TIMEOUT_MS: '1500' });
  fleet = await startFleet(redis.url, env, { roles: ['runner'] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

test('approval: [run_code] pauses the call; approved, it runs in bubblewrap and its result reaches the model', {
  timeout: 90_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: 'run the gated code' });
  const call = await pendingCall(fleet, goalId);
  assert.equal(call.tool, 'run_code');
  assert.equal(call.input, JSON.stringify({ language: 'python', code: CODE }));
  assert.equal(runnerRequests(false).length, 1, 'the call ran before it was approved');

  const r = await runCli(['approve', goalId, call.callId], { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(r.code, 0, r.stderr);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 45_000 });
  assert.equal(g.status, 'done', g.reason ?? '');

  const reqs = runnerRequests(false);
  assert.equal(reqs.length, 2, 'the paused turn was asked again');
  const [result] = resultsOf(reqs[1]);
  assert.equal(result!.tool_use_id, 'toolu_run');
  assert.notEqual(result!.is_error, true, String(result!.content));
  assert.match(String(result!.content), /^exit 0\nrun_code: python, [\d.]+ s, sandbox bwrap\n--- stdout ---\n42\n/);
  assert.match(String(await fleet.client.read(goalId, 'answer.md')), /^got: ok: exit 0\n/);
});

test('a worker stopped while an approved call runs: the next worker runs the call, not its cut-short result', {
  timeout: 90_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: 'run the gated code slowly' });
  const call = await pendingCall(fleet, goalId);
  const old = fleet.procs.find((p) => p.name === 'worker-runner')!;
  const r = await runCli(['approve', goalId, call.callId], { ...fleet.env, LOG_LEVEL: 'silent' });
  assert.equal(r.code, 0, r.stderr);
  // The approved call starts once the paused job is taken again: stop the worker during it.
  await until(() => old.output().includes('resuming after approval'), 30_000);
  await new Promise((res) => setTimeout(res, 500));
  assert.equal(await stopProcess(old, 'SIGTERM'), 0, old.output());
  assert.match(old.output(), /drain timeout: handing active jobs back/);
  const fresh = await fleet.start('worker-runner-2', ['worker', '--role', 'runner']);

  const g = await fleet.client.waitFor(goalId, { timeoutMs: 45_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.match(fresh.output(), /resuming after approval/);
  const reqs = runnerRequests(true);
  assert.equal(reqs.length, 2, 'the paused turn was asked again, or the cut-short turn reached the model');
  const [result] = resultsOf(reqs[1]);
  assert.notEqual(result!.is_error, true, String(result!.content));
  assert.match(String(result!.content), /^exit 0\nrun_code: python, [\d.]+ s, sandbox bwrap\n--- stdout ---\n42\n/);
});
