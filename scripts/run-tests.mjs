#!/usr/bin/env node
// `npm test` and its parts: the test files under tests/, two at a time (most of a test's time is
// waiting on processes, Redis and timers, so two files share the 2 cores well: 13 minutes
// instead of 18), except the chaos runs, which kill processes on a clock and run alone first.
// Usage: node scripts/run-tests.mjs [all|unit|int|live]; DEEPQ_TEST_CONCURRENCY sets the files at a time.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const KINDS = {
  all: (f) => !f.endsWith('.live.test.ts'),
  unit: (f) => !f.endsWith('.int.test.ts') && !f.endsWith('.live.test.ts'),
  int: (f) => f.endsWith('.int.test.ts'),
  live: (f) => f.endsWith('.live.test.ts'),
};
/** Files that must have the machine to themselves: their faults are timed against lock renewals. */
const ALONE = /^tests\/system\/chaos-/;

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return testFiles(path);
    return e.name.endsWith('.test.ts') ? [path] : [];
  });
}

function run(files, concurrency) {
  if (!files.length) return 0;
  const args = ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  return r.status ?? 1;
}

const kind = process.argv[2] ?? 'all';
if (!(kind in KINDS)) {
  console.error(`run-tests: unknown kind "${kind}" (one of ${Object.keys(KINDS).join(', ')})`);
  process.exit(2);
}
const concurrency = Number(process.env.DEEPQ_TEST_CONCURRENCY ?? 2);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`run-tests: DEEPQ_TEST_CONCURRENCY must be a whole number of at least 1, not "${concurrency}"`);
  process.exit(2);
}
// Integration files first, the quick unit files last: two at a time, the units fill in while the
// last long file runs, instead of one slot waiting idle on it at the end.
const isUnit = (f) => !f.endsWith('.int.test.ts');
const files = testFiles('tests')
  .filter(KINDS[kind])
  .sort((a, b) => Number(isUnit(a)) - Number(isUnit(b)) || a.localeCompare(b));
const alone = files.filter((f) => ALONE.test(f));
const shared = files.filter((f) => !ALONE.test(f));
const failedAlone = run(alone, 1);
const failedShared = run(shared, concurrency);
process.exit(failedAlone || failedShared);
