// The sandbox's pure parts: how a finished run is judged (limit, outcome, verdict line), what
// bubblewrap's failures mean to an operator, where bwrap is looked for, the command line (bwrap
// starts with an empty environment), the output tail, run_tests' default command and the work
// dir's walk (folders counted against its cap).
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { findExecutable } from '../../shared/agent/sandbox/binaries.ts';
import { SANDBOX_UID, sandboxCommand } from '../../shared/agent/sandbox/command.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import { type Exit, limitOf, outcomeOf, SANDBOX_OUTCOMES } from '../../shared/agent/sandbox/outcome.ts';
import { Tail } from '../../shared/agent/sandbox/output.ts';
import { explainBwrapFailure } from '../../shared/agent/sandbox/probe.ts';
import type { SandboxResult } from '../../shared/agent/sandbox/run.ts';
import { walkWorkDir } from '../../shared/agent/sandbox/workdir.ts';
import { verdictLine } from '../../shared/agent/tools/run-report.ts';
import { defaultTestCommand } from '../../shared/agent/tools.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const limits = SandboxSchema.parse({ wallSeconds: 30, cpuSeconds: 10, memoryMb: 512, outputBytes: 1024 * 1024 });
const exit = (e: Partial<Exit>): Exit => ({ code: 0, signal: null, killed: null, stderrTail: '', seconds: 1, ...e });

function judged(e: Partial<Exit>): [string, string | undefined, string] {
  const x = exit(e);
  const limit = limitOf(x, limits);
  const res = { ...x, limit, outcome: outcomeOf(x, limit) } as unknown as SandboxResult;
  return [res.outcome, limit?.kind, verdictLine(res)];
}

test('a finished run is judged by who killed it, its signal, then its stderr', () => {
  assert.deepEqual(judged({}), ['ok', undefined, 'exit 0']);
  assert.deepEqual(judged({ code: 3 }), ['nonzero_exit', undefined, 'exit 3']);
  assert.deepEqual(judged({ code: null, signal: 'SIGKILL', killed: 'wall' }), [
    'timeout',
    'wall',
    'limit hit: wall time (30 s), the run was killed',
  ]);
  assert.deepEqual(judged({ code: null, signal: 'SIGKILL', killed: 'output' }), [
    'output_limit',
    'output',
    'limit hit: output (1 MiB), the run was killed',
  ]);
  // bubblewrap reports a program killed by SIGXCPU as 128 + 24.
  assert.deepEqual(judged({ code: 152 }), ['timeout', 'cpu', 'limit hit: CPU time (10 s); killed by SIGXCPU']);
  assert.deepEqual(judged({ code: null, signal: 'SIGXCPU' }), [
    'timeout',
    'cpu',
    'limit hit: CPU time (10 s); killed by SIGXCPU',
  ]);
  // The hard CPU limit is a SIGKILL: after the CPU limit's time it is the CPU; before, just a kill.
  assert.deepEqual(judged({ code: 137, seconds: 11 }), [
    'timeout',
    'cpu',
    'limit hit: CPU time (10 s); killed by SIGKILL',
  ]);
  assert.deepEqual(judged({ code: 137, seconds: 0.5 }), ['nonzero_exit', undefined, 'killed by SIGKILL']);
  assert.deepEqual(judged({ code: 1, stderrTail: 'Traceback ...\nMemoryError\n' }), [
    'memory',
    'memory',
    'limit hit: memory (512 MiB); exit 1',
  ]);
  assert.deepEqual(
    judged({
      code: 134,
      stderrTail: 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
    }),
    ['memory', 'memory', 'limit hit: memory (512 MiB); killed by SIGABRT'],
  );
  assert.deepEqual(judged({ code: 1, stderrTail: 'OSError: [Errno 27] File too large' }), [
    'output_limit',
    'file_size',
    'limit hit: file size (16 MiB); exit 1',
  ]);
  // A fork bomb's shell may exit 0 with its forks refused: still reported, and counted `error`.
  assert.deepEqual(judged({ code: 0, stderrTail: 'bash: fork: retry: Resource temporarily unavailable' }), [
    'error',
    'processes',
    'limit hit: processes (64); exit 0',
  ]);
  // A passing test that prints "MemoryError" is not a memory limit.
  assert.deepEqual(judged({ code: 0, stderrTail: 'test_raises_MemoryError ... ok' }), ['ok', undefined, 'exit 0']);
  assert.equal(judged({ code: null, signal: 'SIGKILL', killed: 'cancel' })[0], 'error');
  // Exactly the six outcomes the metric documents.
  assert.deepEqual(SANDBOX_OUTCOMES, ['ok', 'nonzero_exit', 'timeout', 'memory', 'output_limit', 'error']);
});

test("bubblewrap's failures name what is missing", () => {
  assert.match(
    explainBwrapFailure(
      'bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)',
    ),
    /^user namespaces are disabled or not allowed/,
  );
  assert.match(explainBwrapFailure('bwrap: setting up uid map: Permission denied'), /^user namespaces are disabled/);
  assert.match(
    explainBwrapFailure("bwrap: Can't mount proc on /newroot/proc: Operation not permitted"),
    /^a new \/proc cannot be mounted .*bwrap said: bwrap: Can't mount proc/,
  );
  assert.match(explainBwrapFailure('bwrap: something else'), /^the probe run failed: bwrap: something else$/);
});

test('bwrap and prlimit are looked up on PATH: absolute entries only, executable files only', () => {
  const dir = tempDir('deepq-path-');
  writeFileSync(join(dir, 'bwrap'), '#!/bin/sh\n');
  assert.equal(findExecutable('bwrap', dir), null, 'not executable');
  chmodSync(join(dir, 'bwrap'), 0o755);
  assert.equal(findExecutable('bwrap', `relative/dir:${dir}`), join(dir, 'bwrap'));
  symlinkSync('/usr/bin/prlimit', join(dir, 'prlimit'));
  assert.equal(findExecutable('prlimit', dir), join(dir, 'prlimit'));
  assert.equal(findExecutable('bwrap', '/nonexistent:relative'), null);
  assert.equal(findExecutable('bwrap', undefined), null);
});

test('the command: bwrap starts with an empty environment, the program gets a clean one, root drops to nobody', () => {
  const base = {
    bwrap: '/usr/bin/bwrap',
    prlimit: '/usr/bin/prlimit',
    workDir: '/tmp/w',
    limits,
    argv: ['python3', 'x.py'],
  };
  const bw = sandboxCommand({ ...base, mode: 'bwrap', uid: 0 });
  assert.equal(bw.file, '/usr/bin/bwrap');
  assert.deepEqual(bw.env, {}, "bwrap's pid 1 keeps its environment: it must hold nothing");
  assert.deepEqual([bw.uid, bw.gid], [SANDBOX_UID, SANDBOX_UID]);
  const args = bw.args.join(' ');
  for (const flag of ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--clearenv']) {
    assert.ok(args.includes(flag), flag);
  }
  // The work dir a tmpfs of the files limit and a margin (a hard bound), its inputs read-only beside it.
  assert.match(args, /--ro-bind \/tmp\/w \/\.inputs --size 17825792 --tmpfs \/work --chdir \/work/);
  assert.doesNotMatch(args, /--bind \/tmp\/w \/work/, 'no host dir the program can write');
  assert.match(args, /--as-pid-1 --info-fd 5/);
  assert.match(
    args,
    / deepq-keeper \/usr\/bin\/prlimit --cpu=10:11 --nproc=64 --data=536870912 --fsize=16777216 .* -- python3 x\.py$/,
  );
  assert.match(args, /--setenv NODE_OPTIONS --max-old-space-size=256/);
  const none = sandboxCommand({ ...base, mode: 'none', uid: 1000 });
  assert.equal(none.file, '/usr/bin/prlimit');
  assert.equal(none.uid, undefined, 'a non-root worker keeps its uid');
  assert.deepEqual(Object.keys(none.env).sort(), [
    'HOME',
    'LANG',
    'NODE_OPTIONS',
    'PATH',
    'PYTHONDONTWRITEBYTECODE',
    'PYTHONUNBUFFERED',
    'TMPDIR',
  ]);
  assert.equal(none.cwd, '/tmp/w');
});

test('an output tail keeps the last bytes and counts the rest', () => {
  const t = new Tail(10);
  for (let i = 0; i < 100; i++) t.push(Buffer.from(`line ${i}\n`));
  assert.equal(t.text(), '98\nline 99\n'.slice(-10));
  assert.equal(t.total, 790);
  assert.equal(t.dropped(), 780);
});

test("run_tests' default command follows the files given", () => {
  assert.equal(defaultTestCommand(['app.py', 'test_app.py']), 'python3 -m unittest discover -v');
  assert.equal(defaultTestCommand(['lib.mjs', 'lib.test.mjs']), 'node --test');
  assert.throws(() => defaultTestCommand(['README.md']), /no default test command/);
});

test('the walk counts folders as entries and bytes: only empty folders still reach the cap', async () => {
  const root = mkdtempSync(join(tmpdir(), 'deepq-walk-'));
  for (let i = 0; i < 30; i++) mkdirSync(join(root, `d${i}`));
  mkdirSync(join(root, 'd0', 'inner'));
  writeFileSync(join(root, 'd0', 'inner', 'f.txt'), 'hello');
  // 32 entries (31 folders, one file): a cap of 32 holds them all, one less stops the walk.
  const all = await walkWorkDir(root, 32);
  assert.equal(all.truncated, false);
  assert.deepEqual(
    all.entries.map((e) => [e.name, e.bytes]),
    [['d0/inner/f.txt', 5]],
  );
  assert.ok(all.bytes > 5, `folders take bytes too: ${all.bytes}`);
  const capped = await walkWorkDir(root, 31);
  assert.equal(capped.truncated, true, 'past the cap with folders alone');
  rmSync(root, { recursive: true });
});

test('a deep but ordinary tree is walked whole: 60 nested folders are no reason to kill a run', async () => {
  const root = mkdtempSync(join(tmpdir(), 'deepq-walk-'));
  const deep = join(root, ...Array.from({ length: 60 }, (_, i) => `level${i}`));
  mkdirSync(deep, { recursive: true });
  writeFileSync(join(deep, 'f.txt'), 'hello');
  const walk = await walkWorkDir(root);
  assert.equal(walk.truncated, false);
  assert.deepEqual(
    walk.entries.map((e) => e.name),
    [join(...Array.from({ length: 60 }, (_, i) => `level${i}`), 'f.txt')],
  );
  rmSync(root, { recursive: true });
});
