// Human approval of risky tool calls, end to end: real service processes (planner, reflector,
// a worker per role), the real @anthropic-ai/sdk against the local Messages-API server, a
// private Redis, and the CLI run as a user runs it. The `writer` role needs approval for
// write_file. Approve: the call runs and the goal completes without the model being asked
// again for that turn and without using an attempt. Reject: the model reads the reason.
// Timeout: the call is refused by itself. Cancel: the paused job ends at once. Bad ids get
// clear errors, and hostile tool input reaches the terminal escaped.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { subagentQueueName, subtaskJobId } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, type ServiceProc, startFleet, startProcess, waitForStart } from '../../testing/fleet.ts';
import {
  apiError,
  firstUserText,
  type MessagesApiServer,
  startMessagesApiServer,
  systemText,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import {
  approvalModel,
  CONTENTS,
  events,
  goalFor,
  pendingCall,
  resultsOf,
  sample,
  scrape,
  until,
  WRITER_PROMPT,
  WRITER_THINKING,
  writeApprovalConfig,
  writerRequests,
} from './harness.ts';

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
/** The `timed` role's worker: approval calls time out after 2 s there. */
let timed: ServiceProc;

/** Clears the screen, retitles the terminal, and a C1 CSI. */
const HOSTILE = '\x1b[2J\x1b]0;pwned\x07 \u009b2J';
const SHOWN = '\\u001b[2J\\u001b]0;pwned\\u0007 \\u009b2J';
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler: approvalModel });
  const env = anthropicEnv(server, { DEEPQ_CONFIG: writeApprovalConfig() });
  fleet = await startFleet(redis.url, env, { roles: ['writer', 'helper'] });
  timed = startProcess('worker-timed', ['worker', '--role', 'timed'], {
    ...fleet.env,
    DEEPQ_APPROVAL_TIMEOUT_SECONDS: '2',
  });
  await waitForStart(timed);
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

const cli = (args: string[]) => runCli(args, { ...fleet.env, LOG_LEVEL: 'silent' });
const writerPort = () => fleet.ports.get('worker-writer')!;

async function subagentJob(goalId: string, role = 'writer') {
  const job = await fleet.client.queues.get(subagentQueueName(role)).getJob(subtaskJobId(goalId, 1, 0));
  assert.ok(job, 'the subtask job is gone');
  return job;
}

let approvedGoal = '';
let approvedCall = '';

test('approve: the call runs once approved, the goal completes, the paused turn is not asked again', {
  timeout: 60_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('approve') });
  const call = await pendingCall(fleet, goalId);
  assert.match(call.callId, /^ap-[0-9a-z]{10}$/);
  assert.deepEqual([call.tool, call.status, call.step, call.index], ['write_file', 'pending', 1, 0]);
  assert.equal(call.input, JSON.stringify({ name: 'approve-out.txt', content: 'written by approve\n' }));
  // Waiting: nothing written, the job delayed (no worker slot held), the goal still running.
  assert.equal(await fleet.client.read(goalId, 'approve-out.txt'), null);
  await until(async () => (await (await subagentJob(goalId)).getState()) === 'delayed', 10_000);
  assert.equal((await fleet.client.get(goalId)).status, 'running');
  await until(async () => sample(await scrape(fleet.ports.get('planner')!), 'deepq_approvals_pending') === 1, 10_000);

  const r = await cli(['approve', goalId, call.callId]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    new RegExp(`^approved ${call.callId} \\(write_file\\) of goal ${goalId}; the subtask goes on`),
  );
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done', g.reason ?? '');

  assert.equal(await fleet.client.read(goalId, 'approve-out.txt'), 'written by approve\n');
  assert.match(String(await fleet.client.read(goalId, 'approve.md')), /^result: ok: wrote approve-out\.txt/);
  const reqs = writerRequests(server, 'approve');
  assert.equal(reqs.length, 2, 'the writer asked the model more (or less) than once per turn');
  assert.equal(reqs.filter((q) => q.body.messages.length === 1).length, 1, 'the paused turn was asked again');
  // The writer thinks: the turn it paused on went back after the wait with its thinking first, unchanged.
  const [asked, resumed] = reqs.sort((a, b) => a.body.messages.length - b.body.messages.length);
  assert.deepEqual(asked!.body.thinking, { type: 'enabled', budget_tokens: WRITER_THINKING.budgetTokens });
  const thought = (asked!.response!.body as { content: { type: string }[] }).content[0];
  assert.equal(thought?.type, 'thinking');
  assert.deepEqual((resumed!.body.messages[1]!.content as unknown[])[0], thought);
  // Two starts (before and after the wait), one attempt: the one that completed.
  const job = await subagentJob(goalId);
  assert.deepEqual([job.attemptsStarted, job.attemptsMade], [2, 1], 'waiting for a human used an attempt');
  const started = (await events(fleet, goalId)).filter((e) => e.type === 'subtask_started' && e.index === 0);
  assert.equal(started.length, 1);

  const rec = (await fleet.client.approvals.record(goalId, call.callId))!;
  assert.equal(rec.status, 'approved');
  assert.equal(await fleet.client.approvals.checkpoint(goalId, job.id!), null, 'the pause was not cleared');
  assert.deepEqual(await fleet.client.pendingApprovals(goalId), []);
  const metrics = await scrape(writerPort());
  assert.equal(sample(metrics, 'deepq_approvals_total', 'decision="approved"'), 1);
  assert.equal(sample(metrics, 'deepq_jobs_total', 'status="failed"'), 0, 'the pause counted as a failed job');
  assert.equal(sample(metrics, 'deepq_jobs_total', 'status="delayed"'), 1);
  approvedGoal = goalId;
  approvedCall = call.callId;
});

test('approved, then a 429 on the next call: the retry goes on after the call, which ran once', {
  timeout: 60_000,
}, async () => {
  // The resumed run's first model call (the one after the approved write) gets a 429: the job
  // goes back to its queue and is taken again, from its checkpoint.
  let limited = 0;
  server.setHandler((body, i, req) => {
    const resumedCall = body.messages.length > 1 && firstUserText(body) === 'scenario=approve429';
    if (resumedCall && systemText(body).startsWith(WRITER_PROMPT) && limited++ === 0)
      return apiError(429, 'slow down', { 'retry-after': '1' });
    return approvalModel(body, i, req);
  });
  try {
    const goalId = await fleet.client.enqueue({ goal: goalFor('approve429') });
    const call = await pendingCall(fleet, goalId);
    assert.equal((await cli(['approve', goalId, call.callId])).code, 0);
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
    assert.equal(g.status, 'done', g.reason ?? '');
    assert.equal(limited, 2, 'the 429 was not answered, or the call after it not asked again');
    const writes = (await events(fleet, goalId)).filter((e) => e.type === 'tool_called' && e.tool === 'write_file');
    assert.equal(writes.length, 1, 'the approved write ran again on the retry');
    const [entry] = (await fleet.client.artifacts(goalId)).filter((f) => f.name === 'approve429-out.txt');
    assert.equal(entry?.version, 1);
    // The first turn, the call answered 429, and its retry: the same messages, the write's
    // result read from the checkpoint.
    const reqs = writerRequests(server, 'approve429');
    assert.equal(reqs.length, 3);
    assert.equal(reqs[2]!.rawBody, reqs[1]!.rawBody, 'the retry did not send what the 429 call sent');
    assert.match(String(resultsOf(reqs[2])[0]?.content), /^wrote approve429-out\.txt/);
  } finally {
    server.setHandler(approvalModel);
  }
});

test('reject with a reason: the call never runs and the next request carries the reason as an error', {
  timeout: 60_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('reject') });
  const call = await pendingCall(fleet, goalId);
  const r = await cli(['reject', goalId, call.callId, '--reason', 'not in production: use staging']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^rejected ap-/);
  assert.equal((await fleet.client.waitFor(goalId, { timeoutMs: 30_000 })).status, 'done');

  const reqs = writerRequests(server, 'reject');
  assert.equal(reqs.length, 2);
  const [result] = resultsOf(reqs[1]);
  assert.equal(result!.tool_use_id, 'toolu_reject');
  assert.equal(result!.is_error, true);
  assert.equal(result!.content, 'error: a human rejected this call, it was not run: not in production: use staging');
  assert.equal(await fleet.client.read(goalId, 'reject-out.txt'), null, 'a rejected write ran');
  const decided = (await events(fleet, goalId)).find((e) => e.type === 'approval_decided');
  assert.deepEqual(decided?.type === 'approval_decided' && [decided.callId, decided.decision, decided.reason], [
    call.callId,
    'rejected',
    'not in production: use staging',
  ]);
});

test('timeout: a call nobody decides on is refused by itself and the model reads why', {
  timeout: 60_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('timeout', 'timed') });
  const call = await pendingCall(fleet, goalId);
  assert.equal(call.expiresAt - call.requestedAt, 2000);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done');

  const rec = (await fleet.client.approvals.record(goalId, call.callId))!;
  assert.equal(rec.status, 'timeout');
  assert.ok(rec.decidedAt! >= rec.expiresAt, 'decided before it expired');
  const reqs = writerRequests(server, 'timeout');
  assert.equal(reqs.length, 2);
  const [result] = resultsOf(reqs[1]);
  assert.equal(result!.is_error, true);
  assert.match(
    String(result!.content),
    /^error: no human decided on this call in time, it was not run: no decision within 2 s/,
  );
  assert.equal(await fleet.client.read(goalId, 'timeout-out.txt'), null);
  // Decided (and counted) by the worker's resume, or by the reflector's sweep if it came first.
  const counted = async (port: number) => sample(await scrape(port), 'deepq_approvals_total', 'decision="timeout"');
  assert.equal((await counted(timed.port)) + (await counted(fleet.ports.get('reflector')!)), 1);
  // A late human gets told.
  const late = await cli(['approve', goalId, call.callId]);
  assert.equal(late.code, 1);
  assert.match(late.stderr, new RegExp(`${call.callId} was already decided: timeout at .* \\(no decision within 2 s`));
});

test('cancel while a call waits: the goal is cancelled and the paused job ends at once', {
  timeout: 60_000,
}, async () => {
  const goalId = await fleet.client.enqueue({ goal: goalFor('cancel') });
  const call = await pendingCall(fleet, goalId);
  await until(async () => (await (await subagentJob(goalId)).getState()) === 'delayed', 10_000);
  const started = Date.now();
  const r = await cli(['cancel', goalId]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal((await fleet.client.get(goalId)).status, 'cancelled');
  await until(async () => (await (await subagentJob(goalId)).getState()) === 'completed', 10_000);
  const ms = Date.now() - started;
  const job = await subagentJob(goalId);
  assert.equal(job.returnvalue.skipped, 'cancelled');
  assert.ok(ms < 10_000, `the paused job took ${ms} ms to end`);

  const rec = (await fleet.client.approvals.record(goalId, call.callId))!;
  assert.deepEqual([rec.status, rec.reason], ['cancelled', 'the goal was cancelled']);
  assert.equal(await fleet.client.approvals.checkpoint(goalId, job.id!), null);
  assert.equal(writerRequests(server, 'cancel').length, 1, 'the cancelled run asked the model again');
  await until(async () => sample(await scrape(writerPort()), 'deepq_approvals_total', 'decision="cancelled"') === 1);
});

test('approve and reject refuse bad or stale ids with a clear message', { timeout: 60_000 }, async () => {
  assert.ok(approvedGoal, 'the approve test did not run');
  const cases: [string[], RegExp][] = [
    [['approve', 'Not-A-Goal!', 'ap-0123456789'], /"Not-A-Goal!" is not a goal id/],
    [['approve', approvedGoal, 'toolu_01XYZ'], /"toolu_01XYZ" is not an approval id \(ap- and 10 letters/],
    [['approve', 'nosuchgoal42', 'ap-0123456789'], /unknown goal id: nosuchgoal42/],
    [['reject', approvedGoal, 'ap-0123456789'], new RegExp(`goal ${approvedGoal} has no approval request ap-0123`)],
    [['reject', approvedGoal, approvedCall, '--reason', 'too late'], /was already decided: approved at \d{4}-/],
    [['approve', approvedGoal], /missing required argument 'callId'/],
  ];
  const runs = await Promise.all(cases.map(([args]) => cli(args)));
  for (const [i, [args, expected]] of cases.entries()) {
    const r = runs[i]!;
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}`);
    assert.match(r.stderr, expected, args.join(' '));
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'a stack trace');
  }
  const none = await cli(['approvals', approvedGoal]);
  assert.equal(none.stdout, '(no tool calls waiting for approval)\n');
});

test('hostile tool input shows escaped in status, approvals and watch', { timeout: 60_000 }, async () => {
  // Past the 300-char preview: only --full (and the inspector) show what approving would run.
  CONTENTS.hostile = `${HOSTILE}\n${'# a harmless comment\n'.repeat(16)}rm -rf /`;
  const goalId = await fleet.client.enqueue({ goal: goalFor('hostile') });
  const call = await pendingCall(fleet, goalId);
  const status = await cli(['status', goalId]);
  assert.equal(status.code, 0, status.stderr);
  assert.doesNotMatch(status.stdout, RAW_CONTROL);
  assert.match(status.stdout, /^status {4}running \(waiting for approval: 1 tool call\(s\)\)$/m);
  assert.match(status.stdout, /^approvals 1 tool call\(s\) wait for a human/m);
  const summary = JSON.parse((await cli(['status', goalId, '--json'])).stdout);
  const { callId, tool, role, step, index, requestedAt, expiresAt } = call;
  assert.deepEqual(summary.approvals, [{ callId, tool, role, step, index, requestedAt, expiresAt }]);
  assert.equal(summary.status, 'running');
  assert.ok(status.stdout.includes(`  ${call.callId}  write_file  (cycle 1 [0] writer)`), status.stdout);
  assert.ok(status.stdout.includes(SHOWN), `the input is not shown escaped: ${status.stdout}`);
  const all = await cli(['approvals']);
  assert.doesNotMatch(all.stdout, RAW_CONTROL);
  assert.ok(all.stdout.includes(`goal ${goalId} cycle 1 [0] writer`), all.stdout);
  const json = JSON.parse((await cli(['approvals', goalId, '--json'])).stdout);
  assert.equal(json[0].input, call.input);
  assert.doesNotMatch(call.input, /rm -rf/);
  assert.ok(all.stdout.includes(`(cut: deepq approvals ${goalId} --full shows it whole)`), all.stdout);
  const full = await cli(['approvals', goalId, '--full']);
  assert.doesNotMatch(full.stdout, RAW_CONTROL);
  assert.match(full.stdout, /^ {8}"content": ".*rm -rf \/"$/m);
  const fullJson = JSON.parse((await cli(['approvals', goalId, '--json', '--full'])).stdout);
  assert.equal(JSON.parse(fullJson[0].inputFull).content, CONTENTS.hostile);

  const reject = await cli(['reject', goalId, call.callId, '--reason', `no ${HOSTILE}`]);
  assert.equal(reject.code, 0, reject.stderr);
  await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  const done = await cli(['status', goalId]);
  assert.match(done.stdout, /^status {4}done\b/m);
  assert.doesNotMatch(done.stdout, /waiting for approval/, 'a decided call still shows as waiting');
  assert.deepEqual(JSON.parse((await cli(['status', goalId, '--json'])).stdout).approvals, []);
  const watch = await cli(['watch', goalId]);
  assert.doesNotMatch(watch.stdout, RAW_CONTROL);
  assert.match(watch.stdout, new RegExp(`\\[0\\] writer approval requested ${call.callId}: write_file \\{"name"`));
  assert.ok(watch.stdout.includes(`${call.callId} (write_file) rejected: no ${SHOWN}`), watch.stdout);
});
