// A program writing files at the top of its work dir is measured on each write, not only at the
// next poll: past the files limit it is killed after a file or two, where a poll interval at full
// disk speed let it write several times the limit. Real bubblewrap and prlimit; the poll is set
// to a minute here, so only the write itself can have started the measurement that killed it.
import assert from 'node:assert/strict';
import { chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { SANDBOX_UID } from '../../shared/agent/sandbox/command.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import { runSandboxed } from '../../shared/agent/sandbox/run.ts';
import { createWorkDir, removeWorkDir } from '../../shared/agent/sandbox/workdir.ts';

const LIMITS = SandboxSchema.parse({ wallSeconds: 20, fileBytes: 8 * 1024 * 1024 });

/**
 * Writes two 5 MiB files in `folder` (10 MiB: over the 8 MiB limit), then sleeps 3 s and says so.
 * The folder is made a second before: the measurement its making asks for is over by then.
 */
const writer = (folder: string) =>
  `import os, time\nos.makedirs(${JSON.stringify(folder)}, exist_ok=True)\ntime.sleep(1)\n` +
  `for i in range(2):\n    open(os.path.join(${JSON.stringify(folder)}, "f%d" % i), "wb").write(b"x" * (5 << 20))\n` +
  'time.sleep(3)\nprint("survived")\n';

async function run(folder: string) {
  const root = process.getuid?.() === 0;
  const wd = await createWorkDir(root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null);
  try {
    const file = join(wd.path, 'main.py');
    writeFileSync(file, writer(folder));
    if (root) chownSync(file, SANDBOX_UID, SANDBOX_UID);
    return await runSandboxed({ argv: ['python3', 'main.py'], workDir: wd.path, limits: LIMITS, pollMs: 60_000 });
  } finally {
    await removeWorkDir(wd.path);
  }
}

test('files written at the top of the work dir past its limit: killed on the write, not at a poll', async () => {
  const top = await run('.');
  assert.equal(top.limit?.kind, 'files', `not killed at the files limit: ${top.outcome} ${top.stdout.text()}`);
  assert.doesNotMatch(top.stdout.text(), /survived/);
  // Deeper down only the poll measures: with the poll a minute away the same run goes on.
  const deep = await run('deep/er');
  assert.equal(deep.limit, null, JSON.stringify(deep.limit));
  assert.match(deep.stdout.text(), /survived/);
});
