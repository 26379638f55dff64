// `watch` on a real terminal (a pty made by script(1), 40 columns): every line of the tree is
// cut to the terminal's width, so the redraw, which moves up one row per line it wrote, never
// leaves wrapped rows of the old tree behind.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { BIN } from '../../cli/supervisor.ts';
import { displayWidth } from '../../cli/terminal.ts';
import { runCli, testEnv } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const hasScript = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0;

test('watch on a 40-column terminal writes no line wider than 40 columns', {
  skip: !hasScript && 'no script(1)',
}, async () => {
  await redis.ready;
  const env = testEnv(redis.url);
  const enq = await runCli(['enqueue', `${'a long goal 日本語 '.repeat(12)}end`], env);
  assert.equal(enq.code, 0, enq.stderr);
  const goalId = enq.stdout.trim();
  // Cancelled: watch draws the tree once and exits.
  assert.equal((await runCli(['cancel', goalId], env)).code, 0);
  const cmd = `stty cols 40 rows 30; exec '${process.execPath}' '${BIN}' watch ${goalId}`;
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { env, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 1, `${r.stdout}${r.stderr}`);
  const lines = r.stdout
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the cursor moves the redraw writes.
    .replace(/\x1b\[\d*[A-Za-z]/g, '')
    .split(/\r?\n/)
    .filter(Boolean);
  assert.match(lines[0] ?? '', /^goal: a long goal 日本語.*…$/, r.stdout);
  assert.match(r.stdout, /reason: cancelled/);
  for (const line of lines) assert.ok(displayWidth(line) <= 40, `${displayWidth(line)} columns: ${line}`);
});
