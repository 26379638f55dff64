// The keeper takes a run's end only once no process of the sandbox is alive. A program whose main
// thread exits alone (syscall SYS_exit) reads as a zombie in /proc/<pid>/stat while its other
// threads run on: a review's exploit used that to have the worker read its work dir while a
// thread still swapped folders for symbolic links to /etc. Real processes, no sandbox needed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { hasLiveChild } from '../../shared/agent/sandbox/keeper.ts';
import { procStat } from '../../shared/agent/sandbox/process-tree.ts';
import { until } from '../../testing/until.ts';

const SYS_EXIT: Partial<Record<NodeJS.Architecture, number>> = { x64: 60, arm64: 93 };

test('a zombie whose threads still run counts as alive; once they end, it does not', { timeout: 30_000 }, async (t) => {
  const sysExit = SYS_EXIT[process.arch];
  if (sysExit === undefined) return t.skip(`no SYS_exit number for ${process.arch}`);
  const program = [
    'import ctypes, sys, threading, time',
    'threading.Thread(target=time.sleep, args=(2,)).start()',
    'sys.stdout.write("started\\n"); sys.stdout.flush()',
    `ctypes.CDLL(None).syscall(${sysExit}, 0)`,
  ].join('\n');
  // bash is the parent (the keeper's place); python the program whose leader leaves first.
  const parent = spawn('bash', ['-c', 'python3 -c "$0" & echo $!; wait', program], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  parent.stdout.on('data', (d) => (out += d));
  const pid = Number(await until(() => /^(\d+)\nstarted\n/.exec(out)?.[1], 10_000, 'the program started'));
  await until(async () => (await procStat(pid))?.state === 'Z', 10_000, 'its main thread gone');
  assert.equal(await hasLiveChild(parent.pid!), true, 'a thread still runs: the sandbox is not still');
  await until(async () => !(await hasLiveChild(parent.pid!)), 10_000, 'the last thread ended');
  if (parent.exitCode === null && parent.signalCode === null) await new Promise((r) => parent.once('exit', r));
});
