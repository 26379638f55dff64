// Fail closed: a real `deepq worker --role R` process whose role lists run_code probes its
// sandbox at start and refuses to start (exit 78, a message naming what is missing) when bwrap
// is not on its PATH, when user namespaces are not available to it, or when a new /proc cannot
// be mounted; with `sandbox.mode: none` it starts, with a warning.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { BIN } from '../../cli/supervisor.ts';
import { runCli, startProcess, stopProcess, testEnv, waitForStart } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { writeSandboxConfig } from './harness.ts';

const redis = useRedis();
const isRoot = process.getuid?.() === 0;
let env: NodeJS.ProcessEnv;

before(async () => {
  await redis.ready;
  const config = writeSandboxConfig([
    { name: 'coder', tools: ['read_file', 'run_code'] },
    { name: 'coder-none', tools: ['run_tests'], sandbox: { mode: 'none' } },
  ]);
  env = testEnv(redis.url, { DEEPQ_CONFIG: config });
});

function runWorker(role: string, extraEnv: NodeJS.ProcessEnv = {}) {
  return runCli(['worker', '--role', role], { ...env, ...extraEnv }, 30_000);
}

/** Runs a shell line (the worker under unshare) to completion. */
async function runShell(line: string, extraEnv: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const p = spawn('/bin/sh', ['-c', line], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => p.kill('SIGKILL'), 30_000);
    p.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, stderr });
    });
  });
}

test('without bwrap on its PATH the worker refuses to start, naming it', async () => {
  const bin = tempDir('deepq-nobwrap-');
  symlinkSync('/usr/bin/prlimit', join(bin, 'prlimit'));
  const r = await runWorker('coder', { PATH: bin });
  assert.equal(r.code, 78, r.stderr);
  const line = r.stderr.split('\n')[0]!;
  assert.equal(
    line,
    'deepq: error: role coder runs code (run_code/run_tests) but its sandbox (mode bwrap) cannot run here: ' +
      "bwrap is not installed (Debian package bubblewrap). Install what is missing, or set the role's " +
      'sandbox.mode to "none" to run code WITHOUT isolation',
  );
});

test('without user namespaces for it the worker refuses to start, naming them', async () => {
  // A user namespace allowed one more namespace, spent on the worker's own: bwrap gets none.
  const r = await runShell(
    "unshare --user --map-root-user sh -c 'echo 1 > /proc/sys/user/max_user_namespaces && " +
      `exec unshare --user --map-user=1000 --map-group=1000 ${process.execPath} ${BIN} worker --role coder'`,
    {},
  );
  assert.equal(r.code, 78, r.stderr);
  assert.match(r.stderr, /cannot run here: user namespaces are disabled or not allowed for this user/);
  assert.match(r.stderr, /bwrap said: bwrap: Creating new namespace failed: .*ENOSPC/);
});

test('where a new /proc cannot be mounted (a masked /proc, as in containers) it refuses to start', {
  skip: !isRoot && 'needs root to mask /proc in a mount namespace',
}, async () => {
  const r = await runShell(
    `unshare --mount --propagation private sh -c 'mount -t tmpfs none /proc/driver && ` +
      `exec ${process.execPath} ${BIN} worker --role coder'`,
    {},
  );
  assert.equal(r.code, 78, r.stderr);
  assert.match(r.stderr, /cannot run here: a new \/proc cannot be mounted .*Can't mount proc/);
});

test('with sandbox.mode none the worker starts, with a warning', async () => {
  const w = startProcess('worker-coder-none', ['worker', '--role', 'coder-none'], env);
  await waitForStart(w);
  assert.match(w.output(), /role coder-none: sandbox\.mode is \\"none\\": run_code runs WITHOUT isolation/);
  assert.equal(await stopProcess(w), 0);
});
