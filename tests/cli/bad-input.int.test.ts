// Bad input breaks nothing: each is a clear error naming the problem, with no stack trace
// for the user, and no state is lost. Goal text (empty, huge, binary), unknown commands,
// flags and goal ids at the CLI; malformed job payloads written straight into every queue;
// hostile planner output (through the real SDK and a local Messages-API server); config
// files with wrong types.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Queue } from 'bullmq';
import { BIN } from '../../cli/supervisor.ts';
import { PLAN_QUEUE, REFLECT_QUEUE, subagentQueueName } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, runCli, startFleet, startProcess } from '../../testing/fleet.ts';
import {
  blockText,
  defaultHandler,
  goalOf,
  type MessagesApiServer,
  type RecordedRequest,
  roleOf,
  startMessagesApiServer,
  text,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();
let api: MessagesApiServer;
let fleet: Fleet;
let doneGoal: string;

// The planner's answers for goals whose text starts with `HOSTILE <case>`.
const sub = (role: string, artifact: string) => ({
  role,
  instruction: `write ${artifact.slice(0, 40)}`,
  expected_artifact: artifact,
  read_files: [] as string[],
});
const LONG_NAME = `${'n'.repeat(10 * 1024)}.md`;
const HOSTILE: Record<string, { plan: unknown; problem: RegExp }> = {
  'unknown-role': {
    plan: { subtasks: [sub('wizard', 'spell.md')] },
    problem: /unknown role "wizard" \(known: research-specialist, code-writer, critic\)/,
  },
  'too-many': {
    plan: { subtasks: Array.from({ length: 6 }, (_, i) => sub('research-specialist', `r${i}.md`)) },
    problem: /subtasks: a plan needs 1 to 5 subtasks/,
  },
  duplicate: {
    plan: { subtasks: [sub('research-specialist', 'notes.md'), sub('code-writer', 'notes.md')] },
    problem: /duplicate artifact name "notes\.md"/,
  },
  'dot-dot': {
    plan: { subtasks: [sub('research-specialist', '../x')] },
    problem: /artifact name "\.\.\/x" contains "\.\."/,
  },
  absolute: {
    plan: { subtasks: [sub('research-specialist', '/etc/passwd')] },
    problem: /artifact name "\/etc\/passwd" starts with "\/"/,
  },
  'long-name': {
    plan: { subtasks: [sub('research-specialist', LONG_NAME)] },
    problem: /artifact name is 10243 chars \(max 200\)/,
  },
  control: {
    plan: { subtasks: [sub('research-specialist', 'evil\u0007\nname.md')] },
    problem: /artifact name contains control characters/,
  },
};

before(async () => {
  await redis.ready;
  api = await startMessagesApiServer({
    handler: (body, i, req) => {
      const m = /^HOSTILE ([\w-]+):/.exec(goalOf(body));
      if (m && roleOf(body) === 'planner') return text(JSON.stringify(HOSTILE[m[1]!]!.plan));
      return defaultHandler(body, i, req);
    },
  });
  fleet = await startFleet(redis.url, anthropicEnv(api));
  doneGoal = await fleet.client.enqueue({ goal: 'A goal that finished before the bad input' });
  assert.equal((await fleet.client.waitFor(doneGoal, { timeoutMs: 60_000 })).status, 'done');
});
after(async () => {
  await fleet?.stop();
  await api?.close();
});

/** The goal keys' contents: what "no state lost" compares. */
async function goalState(): Promise<string> {
  const p = fleet.env.DEEPQ_PREFIX!;
  const keys = (await redis.client.keys(`${p}:goal*`)).filter((k) => !k.includes(':thread:')).sort();
  const out: unknown[] = [];
  for (const k of keys) {
    const type = await redis.client.type(k);
    if (type === 'hash') out.push([k, await redis.client.hgetall(k)]);
    else if (type === 'zset') out.push([k, await redis.client.zrange(k, '0', '-1')]);
    else if (type === 'stream') out.push([k, await redis.client.xlen(k)]);
    else out.push([k, type]);
  }
  return JSON.stringify(out);
}

function assertCleanError(r: { code: number | null; stdout: string; stderr: string }, problem: RegExp, what: string) {
  assert.notEqual(r.code, 0, `${what}: exit code 0\n${r.stdout}${r.stderr}`);
  assert.notEqual(r.code, null, `${what}: did not exit (killed at the timeout)`);
  assert.match(r.stderr, problem, `${what}: the error does not name the problem:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr + r.stdout, /^\s+at /m, `${what}: a stack trace reached the user:\n${r.stderr}`);
}

/** Runs the CLI through a shell, so argv can carry bytes that are not valid UTF-8. */
function runShell(
  script: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const proc = spawn('bash', ['-c', script], {
      env: { ...env, TEST_NODE: process.execPath, TEST_BIN: BIN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    proc.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

test('goal text: empty, blank, over 100 KB and binary are refused naming the problem; nothing is stored', {
  timeout: 120_000,
}, async () => {
  const before = await goalState();
  const cases: [string, string[], RegExp][] = [
    ['empty', ['enqueue', ''], /invalid goal request: goal: goal text is empty/],
    ['blank', ['enqueue', '   \n\t '], /goal text is empty/],
    ['huge', ['enqueue', 'x'.repeat(110 * 1024)], /goal text is over 100 KB/],
    ['control characters', ['enqueue', 'binary\u0001\u0002\u0003goal'], /goal text looks binary/],
    ['C1 control characters', ['enqueue', 'a goal\u009b2J that clears the screen'], /goal text looks binary/],
    // The demo refuses it before it starts a Redis or a service (it said so after 18 s).
    ['the demo, empty', ['demo', ''], /invalid goal request: goal: goal text is empty/],
  ];
  const results = await Promise.all(cases.map(([, args]) => runCli(args, fleet.env)));
  for (const [i, [what, , problem]] of cases.entries()) assertCleanError(results[i]!, problem, what);
  assert.equal(results.at(-1)!.stdout, '', 'the demo printed nothing: it started nothing');
  // Bytes that are not UTF-8 at all (as from `deepq enqueue "$(cat image.png)"`).
  const binary = await runShell(`"$TEST_NODE" "$TEST_BIN" enqueue "$(printf 'GIF89a\\xff\\xfe\\x01\\x80')"`, fleet.env);
  assertCleanError(binary, /goal text looks binary \(control or invalid UTF-8 bytes\)/, 'invalid UTF-8');
  assert.equal(await goalState(), before, 'a refused goal changed the stored state');
  assert.equal((await fleet.client.list()).length, 1);
});

test('unknown commands and flags name the offender and print usage, not a stack', { timeout: 120_000 }, async () => {
  const cases: [string[], RegExp][] = [
    [['frobnicate'], /^deepq: error: unknown command 'frobnicate'/m],
    [['enqueue', 'a goal', '--frobnicate'], /error: unknown option '--frobnicate'/],
    [['status'], /error: missing required argument 'goalId'/],
    [['enqueue', 'a goal', '--max-steps', 'many'], /--max-steps must be an integer/],
    // Budgets past what a deadline job or a counter can hold: refused before anything is stored.
    [['enqueue', 'a goal', '--max-seconds', '1e306'], /argument '1e306' is invalid\. --max-seconds must be at most/],
    [['enqueue', 'a goal', '--max-tokens', '1e300'], /--max-tokens must be at most 9007199254740991/],
    [['resume', 'abcdef123456', '--max-seconds', '1e306'], /--max-seconds must be at most 315360000/],
    [['worker'], /error: required option '--role <role>' not specified/],
    [['--bogus-global'], /^deepq: error: unknown option '--bogus-global'/m],
    // Hex is not a number anyone means (Number() read `0x10` as 16); a port has an upper bound.
    [['enqueue', 'a goal', '--max-steps', '0x10'], /--max-steps must be an integer/],
    [['ui', '--port', '70000'], /--port must be at most 65535/],
    // The config's bound, and one machine's: a typo must not start 99999999 jobs or 30,000 processes.
    [['planner', '--concurrency', '1001'], /--concurrency must be at most 1000/],
    [['up', '--replicas', '65'], /--replicas must be at most 64/],
    [
      ['artifacts', 'abcdef123456', '--out', ''],
      /argument '' is invalid\. --out needs a directory \(got an empty string\)/,
    ],
  ];
  const before = await goalState();
  const results = await Promise.all(cases.map(([args]) => runCli(args, fleet.env)));
  cases.forEach(([args, problem], i) => {
    assertCleanError(results[i]!, problem, args.join(' '));
    assert.match(results[i]!.stderr, /deepq --help/, `${args.join(' ')}: no pointer to usage`);
  });
  // What commander echoes back is escaped: no terminal escape from a typed (or pasted) argument.
  const hostile = [
    ['st\x1b[2Jatus'],
    ['enqueue', 'a goal', '--fr\x1b]0;pwned\x07ob'],
    ['goals', '--status', 'x\u009b2J'],
  ];
  for (const args of hostile) {
    const r = await runCli(args, fleet.env);
    assert.equal(r.code, 1, r.stderr);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
    assert.doesNotMatch(r.stderr, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, JSON.stringify(r.stderr));
    assert.match(r.stderr, /\\u001b|\\u009b/, r.stderr);
    assert.match(r.stderr, /[^\n]\n\(run deepq --help for usage\)\n$/, 'the usage pointer keeps its own line');
  }
  // A worker for a role that is not configured stops at start, naming it and the known ones.
  const w = await runCli(['worker', '--role', 'wizard'], fleet.env);
  assertCleanError(
    w,
    /unknown role "wizard" \(configured roles: research-specialist, code-writer, critic\)/,
    'worker --role wizard',
  );
  assert.equal(await goalState(), before);
});

test('unknown goal ids for status, watch, artifacts, cancel, resume and transcript: ' +
  '"unknown goal id", state untouched', { timeout: 120_000 }, async () => {
  const before = await goalState();
  const esc = (id: string) => new RegExp(`unknown goal id: ${id.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`);
  const runs: [string[], RegExp][] = [];
  // A well-formed id nobody created, through every command that takes one.
  for (const cmd of [
    ['status'],
    ['status', '--json'],
    ['watch'],
    ['artifacts'],
    ['cancel'],
    ['resume'],
    ['resume', '--note', 'hi'],
  ]) {
    runs.push([[cmd[0]!, 'abcdef123456', ...cmd.slice(1)], esc('abcdef123456')]);
  }
  // Ids that are not ids at all: a path, a glob, a key-like string.
  for (const id of ['../../etc/passwd', '*', 'deepq:goal:x']) runs.push([['status', id], esc(id)]);
  runs.push([['cancel', '*'], esc('*')]);
  runs.push([
    ['transcript', 'goal-abcdef123456--critic-0a1b2c3d'],
    /no transcript for thread id goal-abcdef123456--critic-0a1b2c3d/,
  ]);
  runs.push([['transcript', 'not a thread id'], /no transcript for thread id not a thread id/]);
  // As `resume --note ""`: an empty reason tells the model nothing.
  runs.push([['reject', 'abcdef123456', 'ap-1', '--reason', ' '], /--reason is empty: say why for the model/]);
  // A word that reads as a goal id: no such goal, and what a thread id would look like.
  runs.push([
    ['transcript', 'nosuchthread'],
    /no goal nosuchthread \(given a goal id, this lists its runs; a run's thread id looks like goal-nosuchthread--/,
  ]);
  // A few at a time: each is a process start.
  for (let i = 0; i < runs.length; i += 4) {
    const batch = runs.slice(i, i + 4);
    const results = await Promise.all(batch.map(([args]) => runCli(args, fleet.env)));
    for (const [j, [args, problem]] of batch.entries()) assertCleanError(results[j]!, problem, args.join(' '));
  }
  // Resuming a goal that is not paused is refused the same way.
  const r = await runCli(['resume', doneGoal], fleet.env);
  assertCleanError(
    r,
    new RegExp(`goal ${doneGoal} is done, not awaiting_human: nothing to resume`),
    'resume of a done goal',
  );
  // An empty note would resume without the re-plan --note promises.
  const blank = await runCli(['resume', doneGoal, '--note', ' '], fleet.env);
  assertCleanError(blank, /--note is empty: give the planner a note, or leave --note out/, 'an empty note');
  assert.equal(await goalState(), before, 'an unknown id changed the stored state');
});

test('malformed job payloads in every queue: the job fails naming the field, ' +
  'the goal it names is untouched, the worker keeps serving', { timeout: 120_000 }, async () => {
  const prefix = fleet.env.DEEPQ_PREFIX!;
  const connection = { url: redis.url };
  const before = await goalState();
  // Each payload and the problem its failure must name.
  const goalShaped: [unknown, RegExp][] = [
    [{}, /goalId: Invalid input: expected string, received undefined; step: Invalid input: expected number/],
    [null, /\(root\): Invalid input: expected object, received null/],
    ['just a string', /\(root\): Invalid input: expected object, received string/],
    [{ goalId: 'NOT A GOAL ID!', step: 1 }, /goalId: goal ids are 6-32 lower-case letters or digits/],
    // A real goal's id with a bad step: the job fails, the goal stays done.
    [{ goalId: doneGoal, step: 'one' }, /step: Invalid input: expected number, received string/],
    [{ goalId: doneGoal, step: -3 }, /step: Too small/],
    [{ goalId: 'abcdef123456', step: 1 }, /unknown goal id: abcdef123456/],
  ];
  const task = {
    goalId: doneGoal,
    step: 1,
    index: 0,
    instruction: 'do it',
    expected_artifact: 'ok.md',
    read_files: [],
  };
  const subtaskShaped = (role: string): [unknown, RegExp][] => [
    [{ ...task, role, instruction: undefined }, /instruction: Invalid input: expected string, received undefined/],
    [
      { ...task, role, expected_artifact: '../../etc/passwd' },
      /expected_artifact: artifact name "\.\.\/\.\.\/etc\/passwd" contains "\.\."/,
    ],
    [{ ...task, role, read_files: ['/etc/shadow'] }, /read_files\.0: artifact name "\/etc\/shadow" starts with "\/"/],
    [{ ...task, role, index: 9 }, /index: Too big/],
    [
      { ...task, role: role === 'critic' ? 'code-writer' : 'critic' },
      new RegExp(`job is for role (critic|code-writer), this worker serves ${role}`),
    ],
    [{ goalId: 'zzzzzz999999' }, /step: Invalid input: expected number/],
  ];
  const queues: [string, [unknown, RegExp][]][] = [
    [PLAN_QUEUE, goalShaped],
    [REFLECT_QUEUE, goalShaped],
    ...fleet.cfg.roles.map((r) => [subagentQueueName(r.name), subtaskShaped(r.name)] as [string, [unknown, RegExp][]]),
  ];
  const added: { queue: Queue; id: string; problem: RegExp; name: string }[] = [];
  const opened: Queue[] = [];
  try {
    for (const [name, cases] of queues) {
      const queue = new Queue(name, { connection, prefix });
      opened.push(queue);
      for (const [i, [data, problem]] of cases.entries()) {
        // Three attempts allowed: a payload error must not be retried.
        const job = await queue.add('raw', data as object, {
          jobId: `raw-${i}`,
          attempts: 3,
          backoff: { type: 'fixed', delay: 100 },
        });
        added.push({ queue, id: job.id!, problem, name });
      }
    }
    for (const a of added) {
      const deadline = Date.now() + 30_000;
      let job = await a.queue.getJob(a.id);
      while ((await job?.getState()) !== 'failed') {
        assert.ok(Date.now() < deadline, `${a.name}/${a.id} never failed (state ${await job?.getState()})`);
        await new Promise((r) => setTimeout(r, 100));
        job = await a.queue.getJob(a.id);
      }
      // Read again: the job object may have been fetched just before it failed.
      job = await a.queue.getJob(a.id);
      assert.match(job!.failedReason, a.problem, `${a.name}/${a.id}: ${job!.failedReason}`);
      assert.equal(job!.attemptsMade, 1, `${a.name}/${a.id} was retried: a bad payload never gets better`);
      assert.doesNotMatch(job!.failedReason, /^\s+at /m);
    }
  } finally {
    await Promise.all(opened.map((q) => q.close()));
  }
  // The done goal those payloads named is untouched, and every service still runs and serves.
  assert.equal(await goalState(), before, 'a malformed job changed a goal');
  for (const p of fleet.procs) assert.equal(p.proc.exitCode, null, `${p.name} died`);
  const after = await fleet.client.enqueue({ goal: 'A normal goal after the garbage' });
  assert.equal((await fleet.client.waitFor(after, { timeoutMs: 60_000 })).status, 'done');
  assert.deepEqual((await fleet.client.artifacts(after)).map((f) => f.name).sort(), [
    'critique.json',
    'research.md',
    'solution.py',
  ]);
});

test('hostile planner output (unknown role, > 5 subtasks, duplicate, ../x, /etc/passwd, ' +
  '10 KB and control-character names) fails the goal naming the problem after one retry', {
  timeout: 120_000,
}, async () => {
  const ids = new Map<string, string>();
  for (const name of Object.keys(HOSTILE))
    ids.set(name, await fleet.client.enqueue({ goal: `HOSTILE ${name}: write some files` }));
  const lastText = (r: RecordedRequest) => blockText(r.body.messages[r.body.messages.length - 1]!.content);
  for (const [name, goalId] of ids) {
    const { problem } = HOSTILE[name]!;
    const g = await fleet.client.waitFor(goalId, { timeoutMs: 60_000 });
    assert.equal(g.status, 'failed', `${name}: ${g.status}`);
    assert.match(
      g.reason!,
      /^planner output rejected: output broke the plan contract twice: plan does not match its schema: /,
      name,
    );
    assert.match(g.reason!, problem, `${name}: ${g.reason!.slice(0, 300)}`);
    assert.ok(!g.reason!.includes(LONG_NAME), `${name}: the reason echoes a 10 KB name`);
    // Asked once, reminded once with the problem, then failed: no third request, no dispatch.
    const reqs = api.requests.filter(
      (r) => r.body && roleOf(r.body) === 'planner' && goalOf(r.body).startsWith(`HOSTILE ${name}:`),
    );
    assert.equal(reqs.length, 2, `${name}: ${reqs.length} planner requests`);
    assert.match(lastText(reqs[1]!), /^Your answer was rejected: /);
    assert.match(lastText(reqs[1]!), problem, `${name}: the reminder does not name the problem`);
    assert.equal(g.planStep, 0, `${name}: a rejected plan was stored`);
    assert.deepEqual(await fleet.client.artifacts(goalId), [], `${name}: files were written`);
    const events = (await fleet.client.goals.events(goalId)).map((e) => e.event.type);
    assert.ok(!events.includes('dispatched') && !events.includes('subtask_started'), `${name}: ${events.join(',')}`);
  }
  // Nothing reached the blob store or the filesystem outside it.
  const blobRoot = join(fleet.cfg.vfs.blobDir, fleet.cfg.prefix);
  for (const goalId of ids.values()) {
    let entries: string[] = [];
    try {
      entries = readdirSync(join(blobRoot, goalId));
    } catch {
      /* no directory: nothing spilled */
    }
    assert.deepEqual(entries, []);
  }
});

test('config files with wrong types stop every service at start, naming the field', { timeout: 120_000 }, async () => {
  const dir = tempDir('deepq-badcfg-');
  const file = (name: string, body: string) => {
    const p = join(dir, name);
    writeFileSync(p, body);
    return p;
  };
  const cases: [string[], string, RegExp | RegExp[]][] = [
    [
      ['planner'],
      file('a.json', JSON.stringify({ concurrency: 'eight' })),
      /concurrency: Invalid input: expected number, received string/,
    ],
    [
      ['reflector'],
      file('b.yaml', 'vfs:\n  spillBytes: big\nmaxDepth: 2.5\n'),
      [/vfs\.spillBytes: Invalid input: expected number, received string/, /maxDepth: Invalid input: expected int/],
    ],
    [
      ['worker', '--role', 'critic'],
      file('c.json', JSON.stringify({ roles: 'all of them' })),
      /roles: Invalid input: expected array, received string/,
    ],
    [
      ['planner'],
      file('d.json', JSON.stringify({ lockDurationMs: -1, redisUrl: 'http://x' })),
      [/redisUrl: must start with redis:\/\/ or rediss:\/\//, /lockDurationMs: Too small/],
    ],
    [['reflector'], file('e.json', JSON.stringify({ lockDuration: 5000 })), /Unrecognized key: "lockDuration"/],
    [
      ['worker', '--role', 'code-writer'],
      file('f.json', '{"concurrency": 4,'),
      /config file .*f\.json is not valid JSON/,
    ],
    [['planner'], join(dir, 'missing.json'), /cannot read config file .*missing\.json/],
    // The parser's excerpt on lines of their own, indented (not one line of literal \n).
    [['planner'], file('g.yaml', 'roles: [\n'), /is not valid YAML: .* at line 2, column 1:\n {2}\n {2}roles: \[\n/],
  ];
  await Promise.all(
    cases.map(async ([args, path, problem]) => {
      // The service's env, with the bad file: the real Redis URL is fine, the file is not.
      const { REDIS_URL: _url, ...env } = fleet.env;
      void _url;
      const p = startProcess(`bad-config ${args.join(' ')}`, args, { ...env, DEEPQ_CONFIG: path });
      const code = await new Promise<number | null>((resolve) => p.proc.once('exit', (c) => resolve(c)));
      const what = `${args.join(' ')} with ${path}`;
      assert.equal(code, 78, `${what}: exit code ${code}\n${p.output()}`);
      for (const re of [problem].flat()) assert.match(p.output(), re, what);
      assert.match(p.output(), /^deepq: error: /m, what);
      assert.doesNotMatch(p.output(), /^\s+at /m, `${what}: a stack trace:\n${p.output()}`);
    }),
  );
});
