// After a real goal, every service's /metrics has the named series with sane values,
// /healthz and /readyz answer, `watch` renders the run, and no secret leaks anywhere.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertCliExit, type Fleet, runCli, startFleet } from '../../testing/fleet.ts';
import { everyValue, useRedis } from '../../testing/redis.ts';

const PASSWORD = 'redis-Pa55word-xyz';
const API_KEY = 'sk-ant-api03-FAKEKEY-must-never-leak-0123456789';
const redis = useRedis({ password: PASSWORD });
let fleet: Fleet;
let goalId: string;

before(async () => {
  await redis.ready;
  // A fake key with the scripted provider asked for explicitly: the key is configured,
  // so it could leak, but nothing calls Anthropic.
  fleet = await startFleet(redis.url, {
    DEEPQ_MODEL_PROVIDER: 'scripted',
    ANTHROPIC_API_KEY: API_KEY,
    LOG_LEVEL: 'debug',
  });
  const r = await runCli(['enqueue', 'Observable goal', '--wait', '--json'], fleet.env);
  await assertCliExit(r, 0, fleet);
  goalId = JSON.parse(r.stdout.trim().split('\n').pop()!).goalId;
});
after(async () => fleet?.stop());

async function scrape(name: string, path = '/metrics'): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${fleet.ports.get(name)}${path}`);
  return { status: res.status, body: await res.text() };
}

function sample(body: string, name: string, labels: Record<string, string> = {}): number {
  const lines = body.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  const hit = lines.find((l) => Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return hit ? Number(hit.split(' ').pop()) : NaN;
}

test('every service answers /healthz and /readyz', async () => {
  for (const name of fleet.ports.keys()) {
    assert.equal((await scrape(name, '/healthz')).status, 200, name);
    const ready = await scrape(name, '/readyz');
    assert.equal(ready.status, 200, name);
    assert.deepEqual(JSON.parse(ready.body).checks, { redis: true, worker: true });
  }
});

test('job, queue, LLM, token, goal and decision metrics carry sane values', async () => {
  const planner = (await scrape('planner')).body;
  assert.equal(sample(planner, 'deepq_jobs_total', { queue: 'plan', status: 'completed' }), 2);
  assert.equal(sample(planner, 'deepq_job_duration_seconds_count', { queue: 'plan' }), 2);
  // A long subtask (tools, approvals) lands in a bucket of its own up to an hour, not in +Inf.
  assert.equal(sample(planner, 'deepq_job_duration_seconds_bucket', { queue: 'plan', le: '3600' }), 2);
  assert.equal(sample(planner, 'deepq_llm_requests_total', { provider: 'scripted', role: 'planner', status: 'ok' }), 2);
  assert.ok(sample(planner, 'deepq_llm_tokens_total', { role: 'planner', kind: 'input' }) > 0);
  assert.ok(sample(planner, 'deepq_llm_latency_seconds_count', { role: 'planner' }) === 2);
  assert.ok(!Number.isNaN(sample(planner, 'deepq_queue_jobs', { queue: 'plan', state: 'waiting' })));
  assert.match(planner, /deepq_process_resident_memory_bytes/);

  const reflector = (await scrape('reflector')).body;
  assert.equal(sample(reflector, 'deepq_reflection_decisions_total', { decision: 'continue' }), 1);
  assert.equal(sample(reflector, 'deepq_reflection_decisions_total', { decision: 'end' }), 1);
  assert.equal(sample(reflector, 'deepq_goals_total', { status: 'done' }), 1);
  // The first sweep runs at start, after this goal: its artifacts are live inline bytes.
  assert.match(reflector, /# TYPE deepq_vfs_bytes gauge/);
  for (const state of ['waiting', 'active', 'delayed', 'failed', 'prioritized', 'waiting-children']) {
    assert.equal(sample(reflector, 'deepq_queue_jobs', { queue: 'subagent-critic', state }), 0, state);
  }

  const coder = (await scrape('worker-code-writer')).body;
  assert.equal(
    sample(coder, 'deepq_jobs_total', { queue: 'subagent-code-writer', role: 'code-writer', status: 'completed' }),
    1,
  );
  // The code-writer's scripted model looks at the files first: two model calls, one job.
  assert.equal(sample(coder, 'deepq_llm_requests_total', { role: 'code-writer', status: 'ok' }), 2);
  assert.ok(sample(coder, 'deepq_vfs_written_bytes_total', { storage: 'inline' }) > 0);
  assert.match(coder, /# TYPE deepq_vfs_evictions_total counter/);
});

test('no metric label carries a goal id', async () => {
  for (const name of fleet.ports.keys()) {
    const body = (await scrape(name)).body;
    assert.ok(!body.includes(goalId), `${name} exposes the goal id`);
  }
});

test('watch renders the finished run as cycles and subtasks, then exits 0', async () => {
  const r = await runCli(['watch', goalId], fleet.env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /cycle 1 planned 2 subtask\(s\): research-specialist→research\.md, code-writer→solution\.py/);
  assert.match(r.stdout, /cycle 1 \[1\] code-writer finished solution\.py \(\d+ B, \d+\.\d\ds, \d+ tok\)/);
  assert.match(r.stdout, /cycle 1 reflected: continue/);
  assert.match(r.stdout, /cycle 2 \[0\] critic finished critique\.json/);
  assert.match(r.stdout, /finished: done/);
});

test('goals --json and status show tokens and an estimated cost', async () => {
  const r = await runCli(['goals', '--json', '--status', 'done'], fleet.env);
  const rows = JSON.parse(r.stdout);
  const row = rows.find((x: { goalId: string }) => x.goalId === goalId);
  assert.ok(row.tokens > 0);
  assert.equal(typeof row.costUsd, 'number');
  const s = await runCli(['status', goalId], fleet.env);
  assert.match(s.stdout, /tokens\s+\d+ \(input \d+, output \d+, cache read 0, cache write 0\)/);
  // The scripted model's usage is booked under its own ids, at no cost.
  assert.match(s.stdout, /critic @ scripted-low/);
  assert.match(s.stdout, /planner @ scripted-high/);
  assert.match(s.stdout, /cost\s+~\$0\.0000/);
});

test('neither the API key nor the Redis password appears in logs, metrics, transcripts or job data', async () => {
  const haystack: string[] = fleet.procs.map((p) => p.output());
  for (const name of fleet.ports.keys()) haystack.push((await scrape(name)).body);
  haystack.push(await everyValue(redis.client));
  const all = haystack.join('\n');
  assert.ok(all.length > 10_000, 'too little was searched to mean anything');
  assert.ok(!all.includes(API_KEY), 'the API key leaked');
  assert.ok(!all.includes(PASSWORD), 'the Redis password leaked');
  // An error path that echoes the URL is scrubbed too.
  const bad = await runCli(
    ['status', 'nosuchgoal1'],
    { ...fleet.env, REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:1` },
    15_000,
  );
  assert.ok(!(bad.stdout + bad.stderr).includes(PASSWORD));
});

test('every log line about a job carries goalId, step, role, threadId and jobId', () => {
  let seen = 0;
  for (const p of fleet.procs) {
    for (const line of p.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      const rec = JSON.parse(line);
      if (rec.jobId === undefined) continue;
      seen++;
      for (const k of ['goalId', 'step', 'role', 'threadId'])
        assert.ok(rec[k] !== undefined, `${p.name}: "${rec.msg}" has no ${k}`);
    }
  }
  assert.ok(seen >= 5, `only ${seen} job log lines`);
});
