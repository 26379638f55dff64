// `deepq resume --file`: a human answers an escalation with the files it needs. Run as a user runs
// it (the CLI process, real services on a private Redis, the scripted model, max depth 1 so that
// the goal escalates after its first cycle): the files are the goal's inputs before its next plan,
// named to the planner as given with the resume, read by the subtask the plan gives them to; one
// of an existing name is its new version, the old one in the history. What cannot be taken (no
// room left, with --end) is refused before anything is stored.

import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadTranscript } from '../../shared/agent/transcripts.ts';
import { type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
let fleet: Fleet;
let cwd: string;
before(async () => {
  await redis.ready;
  fleet = await startFleet(redis.url, { DEEPQ_MAX_DEPTH: '1', LOG_LEVEL: 'warn' });
  cwd = tempDir('deepq-resume-files-');
  writeFileSync(join(cwd, 'spec.md'), 'First spec. MARKER-SPEC-V1\n');
});
after(async () => {
  await fleet?.stop();
  rmSync(cwd, { recursive: true, force: true });
});

/** A goal enqueued with spec.md, escalated after its first cycle (max depth 1). */
async function escalatedGoal(goal: string): Promise<string> {
  const r = await runCli(['enqueue', goal, '--file', 'spec.md'], fleet.env, 60_000, cwd);
  assert.equal(r.code, 0, r.stderr);
  const goalId = r.stdout.trim();
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.pausedFor, 'escalation', g.reason ?? g.status);
  return goalId;
}

async function transcriptText(goalId: string, threadId: unknown): Promise<string> {
  const t = await loadTranscript({ redis: redis.client, goals: fleet.client.goals }, String(threadId));
  assert.ok(t, `no transcript ${String(threadId)} of goal ${goalId}`);
  return JSON.stringify(t.messages);
}

test('resume --file: the files are inputs before the next plan, named to it, and read by its subtask', async () => {
  const goalId = await escalatedGoal('Sort numbers, escalated');
  writeFileSync(join(cwd, 'spec.md'), 'Second spec. MARKER-SPEC-V2\n');
  writeFileSync(join(cwd, 'data.csv'), 'n\n3\n1\nMARKER-DATA-42\n');
  const r = await runCli(['resume', goalId, '--file', 'spec.md', '--file', 'data.csv'], fleet.env, 60_000, cwd);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`resumed ${goalId}: replan with files \\(status queued\\)`));
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 30_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(g.step, 2);

  // spec.md is its second version (given at cycle 1), the first kept in the history.
  const spec = (await fleet.client.artifacts(goalId)).find((f) => f.name === 'spec.md')!;
  assert.deepEqual([spec.version, spec.step, spec.input], [2, 1, true]);
  assert.match(spec.writer!, /^input-r1-\w+$/);
  assert.equal(await fleet.client.read(goalId, 'spec.md'), 'Second spec. MARKER-SPEC-V2\n');
  const history = await fleet.client.vfs.history(goalId, 'spec.md');
  assert.deepEqual(
    history.map((h) => [h.version, h.content]),
    [[1, 'First spec. MARKER-SPEC-V1\n']],
  );
  const listed = await runCli(['artifacts', goalId], fleet.env);
  assert.match(listed.stdout, /^data\.csv +done +21 B +step 1 +input +v1$/m);

  const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
  const resumed = events.find((e) => e.type === 'resumed')!;
  assert.deepEqual(resumed, {
    ...resumed,
    action: 'replan with files',
    inputs: [
      { name: 'spec.md', bytes: 28 },
      { name: 'data.csv', bytes: 21 },
    ],
  });
  // The resume's plan names them; the first plan did not have them.
  const planned = events.filter((e) => e.type === 'planned');
  assert.equal(planned.length, 2);
  const given = /Files a human gave with the resume \(marked input above\): data\.csv, spec\.md/;
  assert.match(await transcriptText(goalId, planned[1]!.threadId), given);
  assert.doesNotMatch(await transcriptText(goalId, planned[0]!.threadId), /Files a human gave/);
  // The cycle's critic was given both (read_files), and read the new version.
  const critic = events.find((e) => e.type === 'subtask_finished' && e.step === 2);
  assert.ok(critic && critic.type === 'subtask_finished', 'no subtask finished in cycle 2');
  const read = await transcriptText(goalId, critic.threadId);
  assert.match(read, /MARKER-SPEC-V2/);
  assert.match(read, /MARKER-DATA-42/);
  assert.doesNotMatch(read, /MARKER-SPEC-V1/);
});

test('resume --file is refused, nothing stored, with --end, at a budget pause, or with no room left', async () => {
  const goalId = await escalatedGoal('Sort numbers, refused files');
  writeFileSync(join(cwd, 'a.md'), 'a\n');
  writeFileSync(join(cwd, 'b.md'), 'b\n');
  let r = await runCli(['resume', goalId, '--end', '--file', 'a.md'], fleet.env, 60_000, cwd);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /--end ends the goal: it takes no --note, --file nor a raised budget/);
  // 8 files at most, 5 kept for a plan: the goal holds research.md and solution.py besides spec.md.
  const small = { ...fleet.env, DEEPQ_MAX_FILES_PER_GOAL: '8' };
  r = await runCli(['resume', goalId, '--file', 'a.md', '--file', 'b.md', '--file', 'spec.md'], small, 60_000, cwd);
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /3 input files: at most 1 \(a goal holds 8 files, 5 kept for its subtasks, it has 2 besides these\)/,
  );
  r = await runCli(['resume', goalId, '--file', 'missing.md'], fleet.env, 60_000, cwd);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /--file "missing\.md": cannot be read \(ENOENT\)/);
  const g = await fleet.client.get(goalId);
  assert.equal(g.status, 'awaiting_human', 'a refused resume moved the goal');
  const names = (await fleet.client.artifacts(goalId)).map((f) => f.name).sort();
  assert.deepEqual(names, ['research.md', 'solution.py', 'spec.md'], 'a refused resume stored a file');
  // One that fits is taken: spec.md replaces its own version, so the goal keeps 3 files and 5 free.
  r = await runCli(['resume', goalId, '--file', 'spec.md'], small, 60_000, cwd);
  assert.equal(r.code, 0, r.stderr);
  assert.equal((await fleet.client.artifacts(goalId)).find((f) => f.name === 'spec.md')!.version, 2);
});
