// Terminal escapes written by a model or a user (goal text, reflection and failure reasons,
// transcripts, artifact contents) never reach the terminal raw: `status`, `watch` (lines and
// tree), `goals`, `transcript` and the demo print them as visible escapes, and `--json` stays
// JSON with C1 controls escaped too. The hostile text is planted through the real lifecycle
// transitions, as a model's answers would put it there, or comes from a model over HTTP (the
// demo); the CLI runs as a user runs it.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { BIN } from '../../cli/supervisor.ts';
import { saveTranscript } from '../../shared/agent/transcripts.ts';
import { newGoalId } from '../../shared/goal/ids.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { runCli } from '../../testing/fleet.ts';
import {
  defaultHandler,
  defaultReflection,
  defaultSummary,
  roleOf,
  startMessagesApiServer,
  text,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => {
  t = x;
});

/** Clears the screen, retitles the terminal, and a C1 CSI clearing it again. */
const HOSTILE = '\x1b[2J\x1b]0;pwned\x07 \u009b2J';
/** How HOSTILE must look on the terminal. */
const SHOWN = '\\u001b[2J\\u001b]0;pwned\\u0007 \\u009b2J';
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

/** As RAW_CONTROL, but tabs allowed: artifact contents in the demo keep theirs. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL_BUT_TAB = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

function assertNoRawControls(out: string, what: string, control = RAW_CONTROL): void {
  const m = control.exec(out);
  const at = m ? JSON.stringify(out.slice(Math.max(0, m.index - 40), m.index + 40)) : '';
  assert.equal(m, null, `${what}: a raw control character U+${m?.[0].charCodeAt(0).toString(16)} near ${at}`);
}

/** Moves a goal through a cycle whose subtask fails and whose reflection continues, with hostile text. */
async function plantCycle(rt: Runtime, goalId: string): Promise<void> {
  const plan = {
    subtasks: [
      { role: 'critic', instruction: `review ${HOSTILE}`, expected_artifact: 'critique.json', read_files: [] },
    ],
  };
  assert.ok(await rt.lifecycle.beginPlanning(goalId));
  assert.ok(await rt.lifecycle.dispatch(goalId, 1, plan, { threadId: threadIdFor(goalId, 'planner', 'abc123') }));
  await rt.goals.appendEvent(goalId, {
    type: 'subtask_failed',
    step: 1,
    index: 0,
    role: 'critic',
    artifact: 'critique.json',
    reason: `subtask ${HOSTILE}`,
  });
  assert.ok(await rt.lifecycle.beginReflecting(goalId));
  const reflection = { decision: 'continue' as const, reason: `reflection ${HOSTILE}` };
  assert.ok(await rt.lifecycle.requeue(goalId, { step: 1, reflection, outcomes: [{ index: 0, status: 'failed' }] }));
}

/** A goal with hostile text everywhere a model or user writes: goal, reasons, a transcript. */
async function plantHostileGoal(): Promise<{ goalId: string; threadId: string }> {
  const goalId = newGoalId();
  // Straight into the store: the enqueue filter refuses C0 in goal text, but goals written
  // before it, or by another producer, and C1 characters are not refused.
  await t.rt.goals.create(goalId, `${HOSTILE} goal text`, {}, false);
  await plantCycle(t.rt, goalId);
  assert.ok(await t.rt.lifecycle.fail(goalId, `failure ${HOSTILE}`, 1));
  const threadId = threadIdFor(goalId, 'critic', 'def456');
  await saveTranscript(t.rt, goalId, threadId, 'critic', [
    { role: 'user', content: `instruction ${HOSTILE}` },
    { role: 'assistant', content: `answer ${HOSTILE}` },
  ]);
  return { goalId, threadId };
}

test('status, watch (lines), goals and transcript print hostile text as visible escapes; ' +
  '--json stays JSON with C1 escaped', { timeout: 60_000 }, async () => {
  await redis.ready;
  const { goalId, threadId } = await plantHostileGoal();
  const runs: Record<string, string[]> = {
    status: ['status', goalId],
    'status --json': ['status', goalId, '--json'],
    watch: ['watch', goalId],
    goals: ['goals'],
    'goals --json': ['goals', '--json'],
    transcript: ['transcript', threadId],
  };
  const out: Record<string, string> = {};
  await Promise.all(
    Object.entries(runs).map(async ([what, args]) => {
      const r = await runCli(args, t.env);
      assertNoRawControls(r.stdout + r.stderr, what);
      // watch follows a failed goal: exit 1 by design; the rest succeed.
      assert.equal(r.code, what === 'watch' ? 1 : 0, `${what}: exit ${r.code}\n${r.stderr}`);
      out[what] = r.stdout;
    }),
  );
  assert.ok(out.status!.includes(`${SHOWN} goal text`), out.status);
  assert.ok(out.status!.includes(`status    failed (failure ${SHOWN})`), out.status);
  for (const line of [
    `created: ${SHOWN} goal text`,
    `cycle 1 [0] critic FAILED critique.json: subtask ${SHOWN}`,
    `cycle 1 reflected: continue (reflection ${SHOWN})`,
    `finished: failed (failure ${SHOWN})`,
  ]) {
    assert.ok(out.watch!.includes(line), `watch does not show ${line}:\n${out.watch}`);
  }
  assert.ok(out.goals!.includes(`${SHOWN} goal text`), out.goals);
  const status = JSON.parse(out['status --json']!);
  assert.deepEqual([status.status, status.reason, status.pausedFor], ['failed', `failure ${HOSTILE}`, null]);
  // The JSON outputs still hold exactly what was written.
  const rows = JSON.parse(out['goals --json']!) as { goalId: string; goal: string }[];
  assert.equal(rows.find((r) => r.goalId === goalId)?.goal, `${HOSTILE} goal text`);
  assert.ok(out['goals --json']!.includes('\\u009b2J'));
  const transcript = JSON.parse(out.transcript!) as { messages: { content: string }[] };
  assert.equal(transcript.messages[1]!.content, `answer ${HOSTILE}`);
});

const hasScript = spawnSync('script', ['--version']).status === 0;

/** Runs `deepq <args>` on a pseudo-terminal (util-linux `script`), as a user's terminal would. */
function onTty(args: string[], env: NodeJS.ProcessEnv) {
  const cmd = [process.execPath, BIN, ...args].map((a) => `'${a}'`).join(' ');
  const proc = spawn('script', ['-qefc', cmd, '/dev/null'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
  return { output: () => output, exited };
}

async function until(what: string, ok: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('watch on a terminal: the tree redraws with its own escapes, and hostile text is shown, not obeyed', {
  timeout: 60_000,
  skip: hasScript ? false : 'no util-linux `script` for a pseudo-terminal',
}, async () => {
  await redis.ready;
  const goalId = newGoalId();
  await t.rt.goals.create(goalId, `${HOSTILE} watched goal`, {}, false);
  const w = onTty(['watch', goalId], t.env);
  await until('the first draw', () => w.output().includes('watched goal'));
  // Each step its own poll (150 ms), so each is its own redraw.
  await plantCycle(t.rt, goalId);
  await new Promise((r) => setTimeout(r, 400));
  assert.ok(await t.rt.lifecycle.fail(goalId, `failure ${HOSTILE}`, 1));
  assert.equal(await w.exited, 1, w.output());
  // A pty writes \n as \r\n.
  const out = w.output().replace(/\r\n/g, '\n');
  // deepq's redraw: cursor up N lines to column 0, clear to the end of the screen.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: deepq's own escapes are the point.
  const redraw = /\x1b\[(\d+)F\x1b\[J/g;
  const draws = out.split(redraw);
  const counts = [...out.matchAll(redraw)].map((m) => Number(m[1]));
  assert.ok(counts.length >= 1, `no redraw:\n${JSON.stringify(out)}`);
  // Each redraw moves up exactly as many lines as the draw before it wrote.
  counts.forEach((n, i) => {
    assert.equal(n, draws[2 * i]!.split('\n').length - 1, `redraw ${i}: ${JSON.stringify(draws[2 * i])}`);
  });
  // Nothing else in the output is a control character.
  assertNoRawControls(out.replace(redraw, ''), 'watch on a tty');
  const last = draws[draws.length - 1]!;
  assert.ok(last.startsWith(`goal: ${SHOWN} watched goal  [failed]\n`), last);
  assert.ok(last.includes(`→ continue (reflection ${SHOWN})`), last);
  assert.ok(last.includes(`failed  (subtask ${SHOWN})`), last);
  assert.ok(last.includes(`reason: failure ${SHOWN}`), last);
});

test('the demo prints hostile reasons and artifact contents as visible escapes, contents keeping their lines', {
  timeout: 180_000,
}, async () => {
  await redis.ready;
  // A model whose research summary and reflection reasons carry terminal escapes.
  const api = await startMessagesApiServer({
    handler: (body, i, req) => {
      const role = roleOf(body);
      if (role === 'research' && body.messages.length > 1) {
        return text(`${defaultSummary(body)}\n\n${HOSTILE} in the summary\n\tindented`);
      }
      if (role === 'reflector') {
        const r = defaultReflection(body);
        return text(JSON.stringify({ ...r, reason: `${r.reason} ${HOSTILE}` }));
      }
      return defaultHandler(body, i, req);
    },
  });
  try {
    const env = {
      PATH: process.env.PATH,
      REDIS_URL: redis.url,
      DEEPQ_PREFIX: 'hostiledemo',
      DEEPQ_BLOB_DIR: tempDir('demo-'),
      ...anthropicEnv(api),
    };
    const r = await runCli(['demo', 'Sort numbers'], env, 150_000);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assertNoRawControls(r.stdout, 'demo', RAW_CONTROL_BUT_TAB);
    assert.ok(r.stdout.includes(`reflected: continue (the code exists but has not been reviewed yet ${SHOWN})`));
    assert.ok(r.stdout.includes(`status: done (the code was written and reviewed; the goal is met ${SHOWN})`));
    // research.md keeps its line breaks and tabs; only the other controls are escaped.
    const research = r.stdout.split('=== research.md')[1] ?? '';
    assert.ok(research.includes(`\n- Key fact 1 about the topic [1]\n`), research);
    assert.ok(research.includes(`\n${SHOWN} in the summary\n\tindented\n`), research);
  } finally {
    await api.close();
  }
});
