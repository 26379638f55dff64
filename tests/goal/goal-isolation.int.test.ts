// Isolation and connection security. A subagent's tools are scoped to its own goal: no
// name (relative, absolute, another goal's id or key prefix, encoded, control characters)
// reads or writes another goal's files. Password URLs (with characters that need escaping)
// and rediss:// (TLS, against a real TLS redis-server) work for the whole fleet.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { awaitOwnListener, freePort } from '../../cli/private-redis.ts';
import { buildSubagentTask } from '../../services/subagent-worker/task.ts';
import { createVfsTools, type Tool } from '../../shared/agent/tools.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { assertCliExit, type Fleet, runCli, startFleet, startProcess } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { type VfsTestRuntime, vfsRuntime } from '../../testing/vfs-runtime.ts';

// A password with characters that must be percent-encoded in a URL.
const PASSWORD = 'p@ss:w/rd #%?&=+ x';
const redis = useRedis({ password: PASSWORD });
let t: VfsTestRuntime;
before(async () => {
  await redis.ready;
  t = vfsRuntime(redis.url, {}, { vfs: { spillBytes: 1024 } });
});
after(async () => t?.close());

const SECRET = 'SECRET-OF-GOAL-B-7f3a';

async function snapshot(goalId: string): Promise<string> {
  const k = t.rt.goals.keys;
  const files = await t.rt.redis.hgetall(k.files(goalId));
  const content = await t.rt.redis.hgetall(k.content(goalId));
  let blobs: string[] = [];
  try {
    blobs = readdirSync(t.blobDirOf(goalId)).sort();
  } catch {
    /* none */
  }
  return JSON.stringify({ files, content, blobs });
}

function tool(tools: Tool[], name: string): Tool {
  return tools.find((x) => x.def.name === name)!;
}

test("a subagent's tools cannot read or write another goal's files by any name", async () => {
  const a = await t.newGoal('goal A');
  const b = await t.newGoal('goal B');
  const prefix = t.rt.cfg.prefix;
  const meta = { status: 'done' as const, step: 1, role: 'research-specialist', writer: 'b-writer' };
  await t.rt.vfs.write(b, 'secret.md', `inline ${SECRET}`, meta);
  await t.rt.vfs.write(b, 'big.md', `${SECRET} `.repeat(200), meta); // spilled to B's blob dir
  await t.rt.vfs.write(b, 'only-in-b.md', SECRET, meta);
  await t.rt.vfs.write(a, 'mine.md', 'goal A content', { ...meta, writer: 'a-writer' });
  const bBefore = await snapshot(b);
  const keysBefore = new Set(await t.rt.redis.keys(`${prefix}:*`));

  const tools = createVfsTools(
    t.rt.vfs,
    { goalId: a, step: 2, role: 'code-writer', threadId: `goal-${a}--code-writer-1`, writer: `${a}:2:0` },
    ['read_file', 'write_file', 'list_files'],
  );
  const names = [
    'secret.md',
    'big.md', // B's own names: A has none such
    `../${b}/secret.md`,
    `../../goal/${b}/files`,
    `..`,
    `.`,
    `./secret.md`,
    `${b}/../secret.md`,
    `/${b}/secret.md`,
    '/etc/passwd',
    `/${prefix}/goal/${b}/content`,
    `${prefix}:goal:${b}:files`,
    `${prefix}:goal:${b}:content`,
    `goal:${b}`,
    `${b}:secret.md`,
    `${b}/secret.md`,
    `goal/${b}/secret.md`,
    `%2e%2e/${b}/secret.md`,
    `..%2f${b}`,
    `\\..\\${b}\\secret.md`,
    `\u2024\u2024/${b}/secret.md`,
    `secret.md\u0000`,
    `secret.md\n`,
    `${b}\r\nsecret.md`,
    '',
    'x'.repeat(10_000),
    '*',
    `${prefix}:goal:*`,
  ];
  const leaks: string[] = [];
  for (const name of names) {
    let out: string;
    try {
      out = await tool(tools, 'read_file').run({ name });
    } catch (err) {
      out = `error: ${(err as Error).message}`;
    }
    if (out.includes(SECRET)) leaks.push(`read_file ${JSON.stringify(name.slice(0, 60))}`);
    try {
      await tool(tools, 'write_file').run({ name, content: `overwritten by A ${'y'.repeat(2000)}` });
    } catch {
      /* refused: fine */
    }
  }
  // Extra arguments cannot re-scope a call.
  await assert.rejects(
    tool(tools, 'read_file').run({ name: 'secret.md', goalId: b }),
    /bad arguments for read_file: .*Unrecognized key: "goalId"/,
  );
  await assert.rejects(
    tool(tools, 'write_file').run({ name: 'x.md', content: 'x', goalId: b }),
    /Unrecognized key: "goalId"/,
  );
  await assert.rejects(tool(tools, 'list_files').run({ goalId: b }), /Unrecognized key: "goalId"/);
  assert.deepEqual(leaks, [], "another goal's content was readable");

  // B is byte-for-byte unchanged; the writes that were accepted landed in A, under A's keys.
  assert.equal(await snapshot(b), bBefore, "goal B's files changed");
  const newKeys = (await t.rt.redis.keys(`${prefix}:*`)).filter((k) => !keysBefore.has(k));
  assert.deepEqual(
    newKeys.filter((k) => !k.startsWith(`${prefix}:goal:${a}`)),
    [],
    'a write created a key outside goal A',
  );
  const listed = await tool(tools, 'list_files').run({});
  assert.ok(!listed.includes('only-in-b.md'), 'list_files showed a file of goal B');
  assert.match(listed, /mine\.md/);
  for (const [name, raw] of Object.entries(await t.rt.redis.hgetall(t.rt.goals.keys.files(a)))) {
    const e = JSON.parse(raw) as { blobRef?: string };
    if (e.blobRef) assert.ok(e.blobRef.startsWith(`${a}/`), `${name}: blob ${e.blobRef} outside goal A`);
  }
  assert.ok(readdirSync(t.blobDirOf(a)).length > 0, 'the spilled writes of goal A went elsewhere');

  // A task's read_files are resolved in the task's goal too, whatever they name.
  const job = {
    goalId: a,
    step: 2,
    index: 0,
    role: 'critic',
    instruction: 'review',
    expected_artifact: 'c.json',
    read_files: ['secret.md', `../${b}/secret.md`, `${prefix}:goal:${b}:content`],
  } as SubagentJob;
  const task = await buildSubagentTask(t.rt, job);
  assert.ok(!task.includes(SECRET), 'read_files reached another goal');
  assert.match(task, /# secret\.md\noverwritten by A/, "secret.md resolves to goal A's own file of that name");
});

test('a password URL with escaped characters works; a wrong password is a clear error at once', {
  timeout: 90_000,
}, async () => {
  // The in-process runtime above connected with it; so does the CLI, from REDIS_URL.
  assert.ok(redis.url.includes(encodeURIComponent(PASSWORD)), redis.url);
  const env = { ...t.env, LOG_LEVEL: 'info' };
  const wrong = redis.url.replace(encodeURIComponent(PASSWORD), 'not-the-password-42');
  const [ok, bad] = await Promise.all([
    runCli(['goals', '--json'], env),
    runCli(['goals'], { ...env, REDIS_URL: wrong }, 30_000),
  ]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(JSON.parse(ok.stdout).length, 2);
  assert.equal(bad.code, 78, bad.stderr);
  assert.match(
    bad.stderr,
    /^deepq: error: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ refused its password: WRONGPASS.*; the password \(and/m,
  );
  assert.ok(!bad.stderr.includes('not-the-password-42') && !bad.stderr.includes(PASSWORD), 'a password was echoed');
  assert.doesNotMatch(bad.stderr, /^\s+at /m);
  // A service with the wrong password stops at start, saying why, rather than lingering.
  const svc = startProcess('planner-wrong-password', ['planner'], { ...env, REDIS_URL: wrong });
  const code = await new Promise<number | null>((resolve) => svc.proc.once('exit', (c) => resolve(c)));
  assert.equal(code, 78, `a config error, not restarted by deepq up: ${svc.output()}`);
  assert.match(svc.output(), /^deepq: error: Redis at \S+ refused its password: WRONGPASS/m);
  assert.ok(!svc.output().includes('not-the-password-42'), 'the wrong password was echoed');
});

test('a database number this Redis lacks stops the CLI, a service and the inspector, writing nothing to db 0', {
  timeout: 90_000,
}, async () => {
  // ioredis only reports the refused SELECT and goes on in database 0, among its other data.
  const keysBefore = await t.rt.redis.dbsize();
  const url = `${redis.url}/99`;
  const env = { ...t.env, REDIS_URL: url, LOG_LEVEL: 'info' };
  const cli = await runCli(['enqueue', 'lands nowhere'], env, 30_000);
  assert.equal(cli.code, 78, cli.stderr);
  assert.match(
    cli.stderr,
    /^deepq: error: Redis at \S+\/99 refused its database: ERR DB index is out of range; the da/m,
  );
  const svc = startProcess('planner-wrong-db', ['planner'], env);
  const code = await new Promise<number | null>((resolve) => svc.proc.once('exit', (c) => resolve(c)));
  assert.equal(code, 78, svc.output());
  assert.match(svc.output(), /^deepq: error: Redis at \S+\/99 refused its database/m);
  // The inspector, which would otherwise serve pages that each fail, stops too.
  const ui = await runCli(['ui', '--port', '0'], env, 30_000);
  assert.equal(ui.code, 78, ui.stderr);
  assert.match(ui.stderr, /^deepq: error: Redis at \S+\/99 refused its database/m);
  assert.equal(await t.rt.redis.dbsize(), keysBefore, 'something was written to database 0');
});

// ---- rediss:// against a real TLS redis-server ------------------------------------------

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.stderr}`);
}

/** A CA and a server certificate for 127.0.0.1 / localhost, made with the openssl CLI. */
function makeCerts(dir: string): { ca: string; cert: string; key: string } {
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=deepq test CA',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
    ],
    dir,
  );
  openssl(
    ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr'],
    dir,
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      'san.ext',
      '-out',
      'server.pem',
    ],
    dir,
  );
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key') };
}

test('rediss:// URLs turn TLS on (config and ioredis options)', async () => {
  const cfg = loadConfig({ REDIS_URL: 'rediss://:pw-123456@redis.example.com:6380/2' });
  assert.equal(cfg.redisUrl, 'rediss://:pw-123456@redis.example.com:6380/2');
  const client = createRedis('rediss://:pw-123456@127.0.0.1:1/2', 'tls-check');
  try {
    assert.ok(client.options.tls, 'ioredis has no TLS options for a rediss:// URL');
    assert.equal(client.options.password, 'pw-123456');
    assert.equal(client.options.db, 2);
  } finally {
    client.disconnect();
  }
  assert.throws(
    () => loadConfig({ REDIS_URL: 'https://redis.example.com' }),
    /redisUrl \(REDIS_URL\): must start with redis:\/\/ or rediss:\/\//,
  );
});

/**
 * A TLS-only redis-server on a free port; another port when the first was taken meanwhile
 * (never another test's server), or null when it exits on every try (no TLS support).
 */
async function startTlsRedis(
  certs: { ca: string; cert: string; key: string },
  dir: string,
  pw: string,
): Promise<{ server: ChildProcess; port: number } | null> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const server = spawn(
      'redis-server',
      [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--tls-cert-file',
        certs.cert,
        '--tls-key-file',
        certs.key,
        '--tls-ca-cert-file',
        certs.ca,
        '--tls-auth-clients',
        'no',
        '--requirepass',
        pw,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    );
    const state = await awaitOwnListener(server, port);
    if (state === 'ready') return { server, port };
    server.kill('SIGKILL');
  }
  return null;
}

test('rediss:// with an escaped password: a whole fleet and the CLI run a goal over TLS; ' +
  'an untrusted certificate fails clearly', { timeout: 180_000 }, async (tt) => {
  const hasTls =
    spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0 &&
    spawnSync('openssl', ['version']).status === 0;
  if (!hasTls) return tt.skip('redis-server or openssl missing');
  const dir = tempDir('deepq-tls-');
  let server: ChildProcess | undefined;
  let fleet: Fleet | undefined;
  try {
    const { ca, cert, key } = makeCerts(dir);
    const pw = PASSWORD;
    const started = await startTlsRedis({ ca, cert, key }, dir, pw);
    if (!started) return tt.skip('redis-server without TLS support (it exits at start)');
    server = started.server;
    const port = started.port;
    const url = `rediss://:${encodeURIComponent(pw)}@127.0.0.1:${port}`;
    // The services trust the test CA the standard Node way.
    fleet = await startFleet(url, { NODE_EXTRA_CA_CERTS: ca, DEEPQ_SCRIPTED_LATENCY_MS: '50' });
    // The CLI, like the services, trusts the test CA through NODE_EXTRA_CA_CERTS.
    const r = await runCli(['enqueue', 'Over TLS', '--wait', '--json'], fleet.env);
    await assertCliExit(r, 0, fleet);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(summary.status, 'done');
    assert.deepEqual([...summary.artifacts].sort(), ['critique.json', 'research.md', 'solution.py']);
    // Straight from Redis, over TLS (NODE_EXTRA_CA_CERTS is read at process start, so this
    // process trusts the CA through ioredis' tls option).
    const direct = new Redis(url, { tls: { ca: readFileSync(ca) }, maxRetriesPerRequest: null });
    try {
      const files = await direct.hgetall(`${fleet.cfg.prefix}:goal:${summary.goalId}:files`);
      assert.deepEqual(Object.keys(files).sort(), ['critique.json', 'research.md', 'solution.py']);
      for (const raw of Object.values(files))
        assert.deepEqual([JSON.parse(raw).status, JSON.parse(raw).version], ['done', 1]);
    } finally {
      direct.disconnect();
    }
    const cli = await runCli(['status', summary.goalId, '--json'], fleet.env);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(JSON.parse(cli.stdout).status, 'done');
    // Without the CA the certificate is not trusted: a clear error, not a hang.
    const { NODE_EXTRA_CA_CERTS: _ca, ...untrusted } = fleet.env;
    void _ca;
    const bad = await runCli(['status', summary.goalId], untrusted, 30_000);
    assert.equal(bad.code, 1, bad.stderr);
    assert.match(bad.stderr, /cannot connect to Redis at rediss:\/\/:\*\*\*@127\.0\.0\.1:\d+: .*certificate/i);
    assert.ok(!bad.stderr.includes(pw) && !bad.stderr.includes(encodeURIComponent(pw)));
  } finally {
    await fleet?.stop();
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server!.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test('edit_file, grep, list_files with a glob and delete_file stay inside their goal too', async () => {
  const a = await t.newGoal('goal A');
  const b = await t.newGoal('goal B');
  const prefix = t.rt.cfg.prefix;
  const meta = { status: 'done' as const, step: 1, role: 'research-specialist', writer: 'b-writer' };
  await t.rt.vfs.write(b, 'secret.md', `inline ${SECRET}`, meta);
  await t.rt.vfs.write(b, 'big.md', `${SECRET} `.repeat(200), meta); // spilled to B's blob dir
  await t.rt.vfs.write(b, 'shared-name.md', `B's ${SECRET}`, meta);
  // Active: A's tools may change it (a done artifact changes only by a planned revision).
  await t.rt.vfs.write(a, 'shared-name.md', 'A version', { ...meta, status: 'active', writer: 'a-writer' });
  const bBefore = await snapshot(b);
  const tools = createVfsTools(
    t.rt.vfs,
    { goalId: a, step: 2, role: 'code-writer', threadId: `goal-${a}--code-writer-1`, writer: `${a}:2:0` },
    ['read_file', 'write_file', 'edit_file', 'list_files', 'grep', 'delete_file'],
  );
  // What each call answered; listings (grep, list_files) must not even name B's files.
  const outputs: { tool: string; out: string }[] = [];
  const attempt = async (name: string, input: unknown) => {
    try {
      outputs.push({ tool: name, out: await tool(tools, name).run(input) });
    } catch (err) {
      outputs.push({ tool: name, out: `error: ${(err as Error).message}` });
    }
  };
  const globs = ['**', '*', `../${b}/**`, `${b}/**`, `**/${b}/**`, `${prefix}:goal:${b}:*`, '/**', '{secret,big}.md'];
  for (const glob of [undefined, ...globs]) {
    await attempt('grep', { pattern: 'SECRET', ...(glob ? { glob } : {}) });
    await attempt('grep', { pattern: '.*', ignore_case: true, ...(glob ? { glob } : {}) });
    await attempt('list_files', glob ? { glob } : {});
  }
  const names = ['secret.md', 'big.md', `../${b}/secret.md`, `${b}/secret.md`, `${prefix}:goal:${b}:content`, '/x'];
  for (const name of names) {
    await attempt('edit_file', { name, old_string: 'SECRET', new_string: 'pwned', replace_all: true });
    await attempt('delete_file', { name });
  }
  await attempt('grep', { pattern: 'SECRET', goalId: b });
  await attempt('delete_file', { name: 'secret.md', goalId: b });
  // A's own file of the same name as one of B's: edited and deleted in A only.
  await attempt('edit_file', { name: 'shared-name.md', old_string: 'A version', new_string: 'A edited' });
  await attempt('delete_file', { name: 'shared-name.md' });

  const leaked = outputs.filter(
    ({ tool, out }) =>
      out.includes(SECRET) || (['grep', 'list_files'].includes(tool) && /secret\.md|big\.md/.test(out)),
  );
  assert.deepEqual(leaked, [], "another goal's names or content reached goal A's tools");
  assert.ok(
    outputs.some(({ tool, out }) => tool === 'grep' && out.includes('shared-name.md:1: A version')),
    "grep did search goal A's own files",
  );
  assert.equal(await snapshot(b), bBefore, "goal B's files changed");
  assert.equal(await t.rt.vfs.read(b, 'shared-name.md'), `B's ${SECRET}`);
  assert.equal((await t.rt.vfs.stat(a, 'shared-name.md'))!.status, 'evicted');
  assert.deepEqual(
    (await t.rt.vfs.index(a)).map((e) => e.name),
    ['shared-name.md'],
    "nothing of B's appeared in A",
  );
});
