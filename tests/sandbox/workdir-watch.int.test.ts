// A program writing files past the files limit is stopped on the write, not at the next poll
// (where a poll interval at full disk speed let it write many times the limit): under mode none
// by the worker's watch of the work dir (a measurement per write), under bubblewrap by the work
// dir's tmpfs size. Real bubblewrap and prlimit; the poll is set to a minute here, so only the
// writes themselves can have stopped the run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SANDBOX_UID, WORK_MARGIN_BYTES } from '../../shared/agent/sandbox/command.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import { runSandboxed } from '../../shared/agent/sandbox/run.ts';
import { createWorkDir, putFile, removeWorkDir, walkWorkDir } from '../../shared/agent/sandbox/workdir.ts';

const LIMITS = SandboxSchema.parse({ wallSeconds: 20, fileBytes: 8 * 1024 * 1024 });

/**
 * Writes two 5 MiB files in `folder` (10 MiB: over the 8 MiB limit), then sleeps 3 s and says so.
 * The folder is made a second before (the measurement its making asks for finds it by then).
 */
const writer = (folder: string) =>
  `import os, time\nos.makedirs(${JSON.stringify(folder)}, exist_ok=True)\ntime.sleep(1)\n` +
  `for i in range(2):\n    open(os.path.join(${JSON.stringify(folder)}, "f%d" % i), "wb").write(b"x" * (5 << 20))\n` +
  'time.sleep(3)\nprint("survived")\n';

async function run(folder: string, before: string | undefined, mode: 'bwrap' | 'none') {
  const root = process.getuid?.() === 0;
  const owner = root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null;
  const wd = await createWorkDir(owner);
  try {
    if (before) await putFile(wd, `${before}/input.txt`, 'an input in a folder');
    await putFile(wd, 'main.py', writer(folder));
    const limits = { ...LIMITS, mode };
    return await runSandboxed({ argv: ['python3', 'main.py'], workDir: wd.path, limits, pollMs: 60_000 });
  } finally {
    await removeWorkDir(wd.path);
  }
}

test('files written past the limit anywhere in the work dir: stopped on the write, not at a poll', async () => {
  // At the top; in folders the program makes; in a folder its inputs came in.
  for (const mode of ['none', 'bwrap'] as const) {
    for (const [folder, before] of [['.'], ['deep/er'], ['in', 'in']] as [string, string?][]) {
      const res = await run(folder, before, mode);
      assert.equal(res.limit?.kind, 'files', `${mode}, ${folder}: ${res.outcome}, ${res.stdout.text()}`);
      assert.doesNotMatch(res.stdout.text(), /survived/);
    }
  }
});

test('files written and removed in turn, never over the limit together: the run goes on', async () => {
  const root = process.getuid?.() === 0;
  const wd = await createWorkDir(root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null);
  try {
    // 4 × 5 MiB written, one at a time, each removed before the next: 20 MiB in all, 5 at once.
    const code =
      'import os, time\nfor i in range(4):\n    open("f%d" % i, "wb").write(b"x" * (5 << 20))\n' +
      '    time.sleep(0.2)\n    os.remove("f%d" % i)\n    time.sleep(0.2)\nprint("survived")\n';
    await putFile(wd, 'main.py', code);
    for (const mode of ['none', 'bwrap'] as const) {
      const limits = { ...LIMITS, mode };
      const res = await runSandboxed({ argv: ['python3', 'main.py'], workDir: wd.path, limits, pollMs: 60_000 });
      assert.equal(res.limit, null, `${mode}: ${JSON.stringify(res.limit)}`);
      assert.match(res.stdout.text(), /survived/);
    }
  } finally {
    await removeWorkDir(wd.path);
  }
});

test('under bubblewrap the work dir is a hard bound: 60 writers at once end within its limit and margin', async () => {
  const root = process.getuid?.() === 0;
  const wd = await createWorkDir(root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null);
  try {
    // 60 processes, each writing 4 MiB as fast as it can and going on past any error: 240 MiB asked for.
    const code =
      'import os\nfor w in range(60):\n    if os.fork() == 0:\n        try:\n' +
      '            with open("w%02d" % w, "wb") as f:\n                for _ in range(64): f.write(b"x" * 65536)\n' +
      '        except OSError:\n            pass\n        os._exit(0)\nfor w in range(60): os.wait()\n' +
      'print(os.statvfs(".").f_blocks * os.statvfs(".").f_frsize)\n';
    await putFile(wd, 'main.py', code);
    let total = -1;
    const res = await runSandboxed({
      argv: ['python3', 'main.py'],
      workDir: wd.path,
      limits: { ...LIMITS, maxProcesses: 100 },
      afterRun: async (dir) => {
        total = dir === null ? -1 : (await walkWorkDir(dir)).bytes;
      },
    });
    assert.equal(res.limit?.kind, 'files', `${res.outcome}: ${res.stderr.text()}`);
    assert.ok(total >= 0, 'the work dir was read before the sandbox went');
    assert.ok(total <= LIMITS.fileBytes + WORK_MARGIN_BYTES, `${total} bytes in the work dir`);
    assert.equal((await walkWorkDir(wd.path)).bytes, Buffer.byteLength(code), 'nothing written on the host');
  } finally {
    await removeWorkDir(wd.path);
  }
});
