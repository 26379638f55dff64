// Escape attempts through the real run_code tool (real bubblewrap, prlimit and processes, the
// goal's real VirtualFs on a private Redis): each is refused, and the tool result says so.
// All share one sandbox config with small limits, so the whole file stays quick.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { findSandboxBinaries } from '../../shared/agent/sandbox/binaries.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import { createSandboxTools, type Tool } from '../../shared/agent/tools.ts';
import { captureLogger } from '../../testing/agent-harness.ts';
import { useRedis } from '../../testing/redis.ts';
import { useVfsRuntime, type VfsTestRuntime } from '../../testing/vfs-runtime.ts';
import { processesWith } from './harness.ts';

const redis = useRedis();
let t: VfsTestRuntime;
useVfsRuntime(redis, (x) => (t = x));

// Wall time well over CPU time: with other test files running, a CPU loop gets a share of a core.
const LIMITS = SandboxSchema.parse({
  wallSeconds: 15,
  cpuSeconds: 1,
  memoryMb: 256,
  maxProcesses: 32,
  outputBytes: 1024 * 1024,
  fileBytes: 8 * 1024 * 1024,
});
const CANARY = `sk-ant-canary-${Math.random().toString(36).slice(2)}`;

function scopeOf(goalId: string) {
  return { goalId, step: 2, role: 'coder', threadId: `goal-${goalId}--coder-1`, writer: `${goalId}:2:0` };
}

function runCode(goalId: string, opts: { limits?: object; signal?: AbortSignal } = {}): Tool {
  const limits = SandboxSchema.parse({ ...LIMITS, ...opts.limits });
  const deps = { vfs: t.rt.vfs, limits, metrics: t.rt.metrics };
  const [tool] = createSandboxTools(deps, scopeOf(goalId), ['run_code'], { signal: opts.signal });
  return tool!;
}

const py = (code: string, extra: object = {}) => ({ language: 'python', code, ...extra });
const sh = (code: string, extra: object = {}) => ({ language: 'shell', code, ...extra });

async function sample(outcome: string): Promise<number> {
  const m = await t.rt.metrics.registry.getSingleMetricAsString('deepq_sandbox_runs_total');
  return Number(new RegExp(`role="coder",outcome="${outcome}"[^}]*\\} (\\d+)`).exec(m)?.[1] ?? 0);
}

test('a TCP connection to the test Redis is refused: the sandbox has its own network', async () => {
  const port = Number(new URL(redis.url).port);
  assert.equal(await redis.client.ping(), 'PONG', 'Redis is up and reachable from the host');
  const goalId = await t.newGoal();
  const out = await runCode(goalId).run(
    py(
      'import socket\n' +
        'for host in ("127.0.0.1", "localhost", "::1"):\n' +
        '    try:\n' +
        `        socket.create_connection((host, ${port}), timeout=2)\n` +
        '        print("CONNECTED", host)\n' +
        '    except Exception as e:\n' +
        '        print("refused", host, type(e).__name__)\n',
    ),
  );
  assert.match(out, /^exit 0\n/);
  assert.doesNotMatch(out, /CONNECTED/);
  assert.match(out, /refused 127\.0\.0\.1 ConnectionRefusedError/);
});

test("/etc/shadow, /root and the worker's cwd are not there; the program runs as nobody", async () => {
  assert.ok(existsSync('/etc/shadow') && existsSync(`${process.cwd()}/package.json`), 'the host has them');
  const goalId = await t.newGoal();
  const out = await runCode(goalId).run(
    sh(
      'id -u; cat /etc/shadow; ls /root; ' +
        `cat ${process.cwd()}/package.json; ls ${process.cwd()}; ls ${tmpdir()} | grep deepq-run- || echo no-work-dirs`,
    ),
  );
  assert.match(out, /^exit \d+\n/);
  const stdout = out.split('--- stdout ---\n')[1]!.split('\n--- ')[0]!;
  assert.equal(stdout, `${process.getuid?.() === 0 ? 65534 : process.getuid?.()}\nno-work-dirs`);
  assert.match(out, /cat: \/etc\/shadow: No such file or directory/);
  assert.match(out, /ls: cannot access '\/root': No such file or directory/);
  assert.match(out, new RegExp(`cat: ${process.cwd()}/package.json: No such file or directory`));
  assert.doesNotMatch(out, /"name": "deepq"/);
});

test("no secret of the worker's environment reaches the program: env, /proc/*/environ", async () => {
  const saved = { key: process.env.ANTHROPIC_API_KEY, url: process.env.REDIS_URL };
  process.env.ANTHROPIC_API_KEY = CANARY;
  process.env.REDIS_URL = redis.url;
  try {
    const goalId = await t.newGoal();
    const out = await runCode(goalId).run(
      sh('env; echo ---; for f in /proc/[0-9]*/environ; do echo "$f"; tr "\\0" "\\n" < "$f"; done'),
    );
    assert.match(out, /^exit 0\n/);
    assert.match(out, /\/proc\/1\/environ\n/, 'pid 1 (bwrap) was read');
    assert.match(out, /PATH=\/usr\/local\/bin:\/usr\/bin:\/bin/);
    assert.ok(!out.includes(CANARY), 'no API key');
    assert.ok(!out.includes('REDIS_URL') && !out.includes(redis.url), 'no REDIS_URL');
    assert.ok(!out.includes('ANTHROPIC'), 'no ANTHROPIC_* variable at all');
  } finally {
    process.env.ANTHROPIC_API_KEY = saved.key;
    process.env.REDIS_URL = saved.url;
    if (saved.key === undefined) delete process.env.ANTHROPIC_API_KEY;
    if (saved.url === undefined) delete process.env.REDIS_URL;
  }
});

test('writes outside the work dir fail, and nothing lands on the host', async () => {
  const tag = `deepq-escape-${Math.random().toString(36).slice(2)}`;
  const refused = [`/usr/${tag}`, `/etc/${tag}`, `/${tag}`, `/work/../${tag}`, `${process.cwd()}/${tag}`];
  const goalId = await t.newGoal();
  const out = await runCode(goalId).run(
    sh(
      [...refused, `/tmp/${tag}`]
        .map((f) => `(echo x > ${f}) 2>/dev/null && echo "wrote ${f}" || echo "refused ${f}"`)
        .join('\n'),
    ),
  );
  for (const f of refused) assert.ok(out.includes(`refused ${f}\n`), `${f}:\n${out}`);
  // The sandbox's /tmp is its own small tmpfs: a write there succeeds and vanishes with it.
  assert.ok(out.includes(`wrote /tmp/${tag}\n`));
  for (const f of [`/tmp/${tag}`, `/usr/${tag}`, `/etc/${tag}`, `/${tag}`, `${process.cwd()}/${tag}`]) {
    assert.equal(existsSync(f), false, `${f} must not exist on the host`);
  }
});

test("the keeper's status line is out of reach: the run's real end is reported, its late file read", async () => {
  const goalId = await t.newGoal();
  // The keeper (pid 1) shares the program's uid. pidfd_getfd took its status fd (refused now by
  // the seccomp filter); /proc/1/fd/4 cannot open it (a socket). A false `exit 0` written there
  // would still wait for the sandbox to be still (keeper.ts); here it cannot even be written.
  const code =
    'import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\n' +
    'print("pidfd_getfd", libc.syscall(438, os.pidfd_open(1), 4, 0), ctypes.get_errno(), flush=True)\n' +
    'try:\n    os.open("/proc/1/fd/4", os.O_WRONLY)\n    print("opened", flush=True)\n' +
    'except OSError as e:\n    print("open refused", e.errno, flush=True)\n' +
    'time.sleep(1)\nopen("late.txt", "w").write("late\\n")\nraise SystemExit(3)\n';
  const out = await runCode(goalId).run(py(code, { save: ['late.txt'] }));
  assert.match(out, /^pidfd_getfd -1 1$/m, out);
  assert.match(out, /^open refused \d+$/m, out);
  assert.match(out, /^exit 3\n/);
  assert.match(out, /late\.txt \(5 bytes, created\)/);
  assert.equal(await t.rt.vfs.read(goalId, 'late.txt'), 'late\n');
});

test('no nested user namespace: unshare inside the sandbox fails (bwrap --disable-userns)', {
  skip: !findSandboxBinaries().disableUserns && 'this bwrap has no --disable-userns (before 0.8.0)',
}, async () => {
  const goalId = await t.newGoal();
  const out = await runCode(goalId).run(sh('unshare --user --map-root-user id -u && echo NESTED; echo "rc=$?"'));
  assert.doesNotMatch(out, /NESTED/);
  assert.match(out, /unshare: unshare failed/);
});

test('a fork bomb hits the process limit and leaves no process behind', async () => {
  const marker = `forkbomb${Math.random().toString(36).slice(2)}`;
  const goalId = await t.newGoal();
  const started = Date.now();
  const errors = await sample('error');
  const out = await runCode(goalId).run(sh(`python3 -c 'import os\nwhile True: os.fork()' ${marker}`));
  assert.match(out, /^limit hit: processes \(32\); exit 1\n/);
  assert.match(out, /BlockingIOError: \[Errno 11\] Resource temporarily unavailable/);
  assert.ok(Date.now() - started < LIMITS.wallSeconds * 1000, 'it failed fast, not at the wall limit');
  assert.deepEqual(processesWith(marker), []);
  // The classic: its shell exits 0 or not, depending on whether its own last fork got through.
  const bash = await runCode(goalId).run(sh(':(){ :|:& };:\nsleep 2'));
  assert.match(bash, /^limit hit: processes \(32\); exit \d+\n/);
  assert.match(bash, /fork: retry: Resource temporarily unavailable/);
  // With its stderr hidden, the limit is still named: the run was seen at 32 tasks. (A program
  // that holds the limit: a bash bomb hidden the same way drops a few below it between its fork
  // retries, so a poll every 250 ms saw it full in most runs, not all.)
  const hold =
    'import os, time\nfor _ in range(64):\n  try:\n    if os.fork() == 0: time.sleep(3); os._exit(0)\n' +
    '  except BlockingIOError: pass\ntime.sleep(1.5)';
  const quiet = await runCode(goalId).run(py(hold));
  assert.match(quiet, /^limit hit: processes \(32\); exit \d+\n/);
  assert.match(quiet, /--- stderr: \(empty\) ---/);
  assert.equal(await sample('error'), errors + 3, 'a process-limit hit counts as error, not ok or nonzero_exit');
});

test('allocating past the memory limit fails: Python MemoryError, node heap out of memory', async () => {
  const goalId = await t.newGoal();
  const before = await sample('memory');
  const pyOut = await runCode(goalId).run(py('b = bytearray(600 * 1024 * 1024)\nprint("allocated")'));
  assert.match(pyOut, /^limit hit: memory \(256 MiB\); exit 1\n/);
  assert.match(pyOut, /MemoryError/);
  assert.doesNotMatch(pyOut, /allocated/);
  const nodeOut = await runCode(goalId, { limits: { cpuSeconds: 30, wallSeconds: 60 } }).run({
    language: 'node',
    code: 'const a = []; for (;;) a.push({ s: "x".repeat(100) + a.length });',
  });
  assert.match(nodeOut, /^limit hit: memory \(256 MiB\); killed by SIGABRT\n/);
  assert.match(nodeOut, /heap out of memory/);
  assert.equal(await sample('memory'), before + 2);
});

test('the memory limit holds for the whole run: four processes under it each, over it together, killed', async () => {
  const goalId = await t.newGoal();
  const before = await sample('memory');
  // 4 × 100 MiB, each under the 256 MiB per-process limit; the bytes are written, so resident.
  const code =
    'import os, time\nfor i in range(4):\n    if os.fork() == 0:\n        b = b"x" * (100 * 1024 * 1024)\n' +
    '        time.sleep(30)\n        os._exit(0)\nos.wait()\nprint("survived")\n';
  const started = Date.now();
  const out = await runCode(goalId).run(py(code));
  assert.match(out, /^limit hit: memory \(256 MiB\); killed by SIGKILL\n/);
  assert.doesNotMatch(out, /survived/);
  assert.ok(Date.now() - started < 12_000, 'killed at the limit, not at the 15 s wall limit');
  assert.equal(await sample('memory'), before + 1);
});

test('memory files (memfd_create) held open count against the memory limit: past it, the run is killed', async () => {
  const goalId = await t.newGoal();
  const before = await sample('memory');
  // 96 × 4 MiB in memory files: no process's resident memory shows them.
  const code =
    'import os, time\nfds = []\nfor i in range(96):\n    fd = os.memfd_create("m")\n' +
    '    os.write(fd, b"x" * (4 * 1024 * 1024))\n    fds.append(fd)\ntime.sleep(12)\nprint("survived")\n';
  const started = Date.now();
  const out = await runCode(goalId).run(py(code));
  assert.match(out, /^limit hit: memory \(256 MiB\); killed by SIGKILL\n/);
  assert.doesNotMatch(out, /survived/);
  assert.ok(Date.now() - started < 12_000, 'killed at the limit, not at the end of its sleep');
  assert.equal(await sample('memory'), before + 1);
});

test('SysV shared memory, message queues and semaphores are refused: memory no limit would see', async () => {
  const goalId = await t.newGoal();
  // A detached segment is in no process's RSS: 12 of 64 MiB held 768 MiB under a 128 MiB limit.
  const code =
    'import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n' +
    'for name, call in (("shmget", lambda: libc.shmget(0, 64 << 20, 0o1600)), ' +
    '("msgget", lambda: libc.msgget(0, 0o1600)), ("semget", lambda: libc.semget(0, 1, 0o1600))):\n' +
    '    print(name, call(), ctypes.get_errno())\n' +
    'import os\nprint("pid", os.getpid())\n';
  const out = await runCode(goalId).run(py(code));
  for (const call of ['shmget', 'msgget', 'semget']) assert.match(out, new RegExp(`^${call} -1 1$`, 'm'), out);
  assert.match(out, /^pid \d+$/m, 'other calls still work');
});

test('ptrace and the calls that reach into another process are refused: the keeper is off limits', async () => {
  const goalId = await t.newGoal();
  // PTRACE_ATTACH to pid 1 (the keeper, the same uid) took it over in a review's exploit.
  const code =
    'import ctypes, platform\nlibc = ctypes.CDLL(None, use_errno=True)\n' +
    'nr = {"x86_64": (101, 310, 311, 438), "aarch64": (117, 270, 271, 438)}[platform.machine()]\n' +
    'for name, n, args in zip(("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"), nr, ' +
    '((16, 1, 0, 0), (1, 0, 0, 0, 0, 0), (1, 0, 0, 0, 0, 0), (0, 0, 0))):\n' +
    '    print(name, libc.syscall(n, *args), ctypes.get_errno())\n';
  const out = await runCode(goalId).run(py(code));
  for (const call of ['ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd'])
    assert.match(out, new RegExp(`^${call} -1 1$`, 'm'), out);
});

/** Python's last lines in the files-limit tests: reached only by a run that was not killed. */
const SLEEP_THEN_SURVIVE = 'time.sleep(12)\nprint("survived")\n';

/** The run was killed at the files limit (`mib` MiB), before the code's last line said "survived". */
function killedAtFilesLimit(out: string, mib: number): void {
  assert.match(out, new RegExp(`^limit hit: files written \\(${mib} MiB`));
  assert.doesNotMatch(out, /survived/);
}

test('files deleted while held open count against the files limit: past it, the run is killed', async () => {
  const goalId = await t.newGoal();
  // 4 × 3 MiB written in the work dir, each unlinked at once: no walk of the folder finds them.
  const code =
    'import os, time\nfs = []\nfor i in range(4):\n    f = open("gone%d" % i, "wb")\n' +
    '    f.write(b"x" * (3 * 1024 * 1024))\n    f.flush()\n    os.unlink("gone%d" % i)\n    fs.append(f)\n' +
    SLEEP_THEN_SURVIVE;
  const started = Date.now();
  const out = await runCode(goalId).run(py(code));
  killedAtFilesLimit(out, 8);
  assert.ok(Date.now() - started < 12_000, 'killed at the limit, not at the end of its sleep');
});

test('a work dir or /tmp filled between two polls, then exit 0: the limit is named', async () => {
  const goalId = await t.newGoal();
  const limits = { fileBytes: 4 * 1024 * 1024 };
  // Three 3 MB writes within a poll: the second is cut by ENOSPC, the third finds no room, the shell goes on.
  const fill = (dir: string) =>
    `for i in 1 2 3; do head -c 3000000 /dev/zero > ${dir}f$i 2>/dev/null || echo failed$i; done; echo done`;
  for (const dir of ['', '/tmp/']) {
    const out = await runCode(goalId, { limits }).run(sh(fill(dir)));
    assert.match(out, /^limit hit: files written \(4 MiB.*\); exit 0\n/, `${dir || 'work dir'}: ${out}`);
    assert.match(out, /^done$/m, 'the run went on to its end');
  }
  // A child killed by the file-size limit that its shell reports, then exit 0.
  const big = await runCode(goalId, { limits }).run(sh('dd if=/dev/zero of=big bs=1M count=40 2>/dev/null; echo done'));
  assert.match(big, /^limit hit: file size \(4 MiB\); exit 0\n/, big);
  // Under the limit, exit 0: no limit.
  const fine = await runCode(goalId, { limits }).run(sh('head -c 1000000 /dev/zero > f; echo done'));
  assert.doesNotMatch(fine, /limit hit/, fine);
});

test('space reserved without a size (fallocate --keep-size) counts against the files limit', async () => {
  const goalId = await t.newGoal();
  // 2 × 6 MiB of blocks held by files whose size stays 0: their sizes alone never reach the limit.
  // (Each under the file size limit: on the work dir's tmpfs a reservation past it is refused.)
  const reserve = (f: string) => `: > ${f} && fallocate -n -l 6M ${f}`;
  const out = await runCode(goalId).run(sh(`${reserve('a')} && ${reserve('b')} && sleep 12 && echo survived`));
  killedAtFilesLimit(out, 8);
  const seconds = Number(/^run_code: shell, ([\d.]+) s/m.exec(out)?.[1]);
  assert.ok(seconds < 12, `stopped at the limit, not at the end of its sleep: ${seconds} s`);
  // The same, deleted while held open: no walk of the folder finds them.
  const hold = (f: string, fd: number) => `: > ${f} && exec ${fd}<>${f} && fallocate -n -l 6M ${f} && rm ${f}`;
  const held = await runCode(goalId).run(sh(`${hold('a', 3)} && ${hold('b', 4)} && sleep 12 && echo survived`));
  killedAtFilesLimit(held, 8);
});

test('files below folders nested past PATH_MAX count: the run is killed, not left to fill the disk', async () => {
  const goalId = await t.newGoal();
  // 17 folders of 250 characters: the worker's walk of the host path meets ENAMETOOLONG there,
  // and it counted what it could not read as nothing (40 files of 3 MiB, 120 MiB, run ok).
  const code =
    'import os, time\nfor i in range(17):\n    os.mkdir("d" * 250)\n    os.chdir("d" * 250)\n' +
    'for i in range(40):\n    open("f%02d" % i, "wb").write(b"x" * 3 * 1024 * 1024)\n' +
    SLEEP_THEN_SURVIVE;
  const limits = { fileBytes: 4 * 1024 * 1024, cpuSeconds: 20, wallSeconds: 20 };
  const out = await runCode(goalId, { limits }).run(py(code));
  killedAtFilesLimit(out, 4);
});

test("folders count against the work dir's entries cap: a run making only empty folders is killed at it", async () => {
  const goalId = await t.newGoal();
  const code = 'import os, time\nfor i in range(5100):\n    os.mkdir("d%05d" % i)\ntime.sleep(12)\nprint("survived")\n';
  // Files and CPU limits high enough that only the entries cap can stop it (mkdir is CPU time).
  const limits = { fileBytes: 64 * 1024 * 1024, cpuSeconds: 20, wallSeconds: 20 };
  const out = await runCode(goalId, { limits }).run(py(code));
  const cap =
    /^limit hit: files written \(64 MiB, or 5000 entries in the work dir or a temp dir\), the run was killed\n/;
  assert.match(out, cap);
  assert.doesNotMatch(out, /survived/);
  const seconds = Number(/^run_code: python, ([\d.]+) s/m.exec(out)?.[1]);
  assert.ok(seconds < 12, `killed at the cap, not at the end of its sleep: ${seconds} s`);
  // Empty files in /tmp or /dev/shm take no bytes of their tmpfs, but kernel memory: capped too.
  for (const dir of ['/tmp', '/dev/shm']) {
    const empty = `import os, time\nfor i in range(5100):\n    open("${dir}/e%05d" % i, "w").close()\n`;
    const tmp = await runCode(goalId, { limits }).run(py(empty + SLEEP_THEN_SURVIVE));
    assert.match(tmp, cap, dir);
    assert.doesNotMatch(tmp, /survived/);
  }
});

test("a folder swapped for a symlink to a host path while the run goes tells nothing of the host's files", async () => {
  const goalId = await t.newGoal();
  // The folder `s` is swapped for a symlink to `target` and back, over and over: a measure that
  // walked names would follow it to the host's path (a big folder past the limit, a file an error).
  const swapper = (target: string) =>
    'import os, time\nos.makedirs("s/a")\nend = time.time() + 3\nwhile time.time() < end:\n' +
    `    os.rename("s", "t"); os.symlink(${JSON.stringify(target)}, "s"); time.sleep(0.002)\n` +
    '    os.unlink("s"); os.rename("t", "s"); os.mkdir("s/x"); os.rmdir("s/x")\nprint("done")\n';
  const limits = { fileBytes: 1024 * 1024, cpuSeconds: 10, wallSeconds: 20 };
  // A big host folder (this checkout's node_modules), a host file, and a path that does not exist.
  for (const target of [`${process.cwd()}/node_modules`, `${process.cwd()}/package.json`, '/no/such/path']) {
    const out = await runCode(goalId, { limits }).run(py(swapper(target)));
    assert.match(out, /^exit 0\n/, `${target}: ${out}`);
    assert.match(out, /^done$/m);
  }
});

test('a CPU loop is stopped at the CPU limit, a sleeper at the wall limit', async () => {
  const goalId = await t.newGoal();
  const cpu = await runCode(goalId).run(py('while True: pass'));
  assert.match(cpu, /^limit hit: CPU time \(1 s\); killed by SIGXCPU\n/);
  const started = Date.now();
  const before = await sample('timeout');
  const wall = await runCode(goalId, { limits: { wallSeconds: 2 } }).run(py('import time\ntime.sleep(60)'));
  const ms = Date.now() - started;
  assert.match(wall, /^limit hit: wall time \(2 s\), the run was killed\n/);
  assert.ok(ms >= 2000 && ms < 4000, `killed at the wall limit, took ${ms} ms`);
  assert.equal(await sample('timeout'), before + 1);
});

test('printing 50 MB is cut at the output limit, early, and the result stays small', async () => {
  const goalId = await t.newGoal();
  const started = Date.now();
  const before = await sample('output_limit');
  const out = await runCode(goalId).run(py('import sys\nfor _ in range(800):\n    sys.stdout.write("y" * 65536)'));
  const ms = Date.now() - started;
  assert.match(out, /^limit hit: output \(1 MiB\), the run was killed\n/);
  assert.match(out, /--- stdout, last 12288 of \d+ bytes ---/);
  assert.ok(out.length < 20_000, `the result is ${out.length} chars`);
  assert.ok(ms < 3000, `killed early: ${ms} ms`);
  assert.equal(await sample('output_limit'), before + 1);
});

test('files: copies in (spilled ones too), created and changed files listed, only regular files saved', async () => {
  const goalId = await t.newGoal();
  // Active: run_code may save over them (a done artifact changes only by a planned revision).
  const seed = { status: 'active' as const, step: 1, role: 'seed', writer: 'seed' };
  const big = 'z'.repeat(300_000);
  await t.rt.vfs.write(goalId, 'data/big.txt', big, seed);
  await t.rt.vfs.write(goalId, 'app.py', 'X = 1\n', seed);
  await t.rt.vfs.write(goalId, 'gone.txt', 'bye\n', seed);
  assert.ok((await t.rt.vfs.stat(goalId, 'data/big.txt'))!.blobRef, 'spilled to the blob store');
  const code =
    'import os\nprint(len(open("data/big.txt").read()))\nopen("app.py", "a").write("Y = 2\\n")\n' +
    'open("out.txt", "w").write("result\\n")\nos.symlink("/etc/passwd", "link.txt")\nos.mkfifo("pipe")\n' +
    'os.symlink("/etc", "etcdir")\nos.remove("gone.txt")\n';
  const save = ['out.txt', 'app.py', 'link.txt', 'pipe', 'etcdir/passwd', 'missing.txt'];
  const out = await runCode(goalId).run(py(code, { files: ['data/big.txt', 'app.py', 'gone.txt'], save }));
  assert.match(out, /^exit 0\n/);
  assert.match(out, /--- stdout ---\n300000\n/);
  assert.match(out, /app\.py \(12 bytes, changed\)/);
  assert.match(out, /out\.txt \(7 bytes, created\)/);
  assert.match(out, /link\.txt \(symlink, created\)/);
  assert.match(out, /gone\.txt \(deleted\)/);
  assert.doesNotMatch(out, /big\.txt/, 'unchanged inputs are not listed');
  assert.match(out, /out\.txt \(7 bytes, version 1\)/);
  assert.match(out, /app\.py \(12 bytes, version 2\)/);
  assert.match(out, /link\.txt: NOT saved: link\.txt is a symlink/);
  assert.match(out, /pipe: NOT saved: pipe is not a regular file/);
  assert.match(out, /etcdir\/passwd: NOT saved: etcdir\/passwd: its folder leads outside the work dir/);
  assert.match(out, /missing\.txt: NOT saved: missing\.txt: no such file in the work dir/);
  assert.equal(await t.rt.vfs.read(goalId, 'out.txt'), 'result\n');
  assert.equal(await t.rt.vfs.read(goalId, 'app.py'), 'X = 1\nY = 2\n');
  const e = (await t.rt.vfs.stat(goalId, 'out.txt'))!;
  const s = scopeOf(goalId);
  assert.deepEqual([e.step, e.role, e.threadId, e.writer, e.status], [s.step, s.role, s.threadId, s.writer, 'active']);
  assert.equal(await t.rt.vfs.stat(goalId, 'link.txt'), null);
});

test('bad inputs are refused before anything runs; a missing or too large one counts as error', async () => {
  const goalId = await t.newGoal();
  await t.rt.vfs.write(goalId, 'data/big.txt', 'z'.repeat(300_000), {
    status: 'done',
    step: 1,
    role: 'seed',
    writer: 'seed',
  });
  const errors = await sample('error');
  // Untrusted names fail the input's validation: no run at all.
  await assert.rejects(runCode(goalId).run(py('1', { files: ['../etc/passwd'] })), /files\.0: artifact name/);
  await assert.rejects(runCode(goalId).run(py('1', { save: ['/etc/passwd'] })), /save\.0: artifact name/);
  assert.equal(await sample('error'), errors);
  // A missing or too large input: a run that could not start.
  await assert.rejects(runCode(goalId).run(py('1', { files: ['nope.py'] })), /no such file: nope\.py/);
  // Too large by the index's sizes: refused before any of it is read.
  const vfs = t.rt.vfs;
  const read = vfs.read;
  let reads = 0;
  vfs.read = (...args) => {
    reads++;
    return read.apply(vfs, args);
  };
  try {
    const small = { limits: { fileBytes: 100_000 } };
    await assert.rejects(runCode(goalId, small).run(py('1', { files: ['data/big.txt'] })), /over the sandbox's 100000/);
  } finally {
    vfs.read = read;
  }
  assert.equal(reads, 0, 'no input was read');
  assert.equal(await sample('error'), errors + 2);
});

test('an aborted job kills the sandbox tree at once', async () => {
  const marker = `sleeper${Math.random().toString(36).slice(2)}`;
  const goalId = await t.newGoal();
  const ac = new AbortController();
  const before = await sample('error');
  const running = runCode(goalId, { signal: ac.signal, limits: { wallSeconds: 60 } }).run(
    sh(`sleep 60 & python3 -c 'import time; time.sleep(60)' ${marker}`),
  );
  const deadline = Date.now() + 5000;
  while (processesWith(marker).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(processesWith(marker).length, 1, 'the sandboxed process runs');
  const abortedAt = Date.now();
  ac.abort();
  await assert.rejects(running, /run_code was killed: the job was aborted/);
  assert.deepEqual(processesWith(marker), []);
  assert.ok(Date.now() - abortedAt < 1000, `gone ${Date.now() - abortedAt} ms after the abort`);
  assert.equal(await sample('error'), before + 1, 'a killed run counts as error');
});

test('mode none: no isolation, but a clean env, limits, its own dir, and a warning on every call', async () => {
  const { logger, lines } = captureLogger('info');
  const goalId = await t.newGoal();
  const deps = { vfs: t.rt.vfs, limits: SandboxSchema.parse({ ...LIMITS, mode: 'none' }), metrics: t.rt.metrics };
  const [tool] = createSandboxTools(deps, scopeOf(goalId), ['run_code'], { log: logger });
  process.env.ANTHROPIC_API_KEY = CANARY;
  try {
    const out = await tool!.run(sh('id -u; pwd; env | sort'));
    assert.match(out, /^exit 0\nrun_code: shell, [\d.]+ s, NO isolation \(sandbox mode none\)\n/);
    assert.match(out, new RegExp(`--- stdout ---\\n${process.getuid?.() === 0 ? 65534 : process.getuid?.()}\\n`));
    assert.match(out, new RegExp(`${tmpdir()}/deepq-run-`));
    assert.ok(!out.includes(CANARY));
    const cpu = await tool!.run(py('while True: pass'));
    assert.match(cpu, /^limit hit: CPU time \(1 s\); killed by SIGXCPU\n/);
  } finally {
    delete process.env.ANTHROPIC_API_KEY;
  }
  const warnings = lines.filter((l) => l.level === 40 && /WITHOUT isolation/.test(l.msg));
  assert.equal(warnings.length, 2, 'one warning per call');
});
