#!/usr/bin/env node
// `npm test` and its parts: the test files under tests/, two at a time (most of a test's time is
// waiting on processes, Redis and timers), except the chaos runs, which kill processes on a clock
// and run alone first. Three at a time was faster on an idle machine (856 s against 991 s for the
// shared files) but starved timing tests (a stream's 400 ms idle timeout) on 2 cores: not the default.
// Usage: node scripts/run-tests.mjs [all|unit|int|live]; DEEPQ_TEST_CONCURRENCY sets the files at a time.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

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

/** Runs the files; `copy`: a second spec report goes to that file too. */
function run(files, concurrency, copy) {
  if (!files.length) return 0;
  const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout'];
  if (copy) reporters.push('--test-reporter=spec', `--test-reporter-destination=${copy}`);
  const args = ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...reporters, ...files];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  return r.status ?? 1;
}

/** A failure of the runs that went first is printed again last, where a CI log's tail shows it. */
function repeatFailure(copy) {
  // Their diagnostics (a chaos run's summary) come before the failures: the whole report, bounded.
  const tail = readFileSync(copy, 'utf8').split('\n').slice(-250);
  console.log(`\nrun-tests: the runs that went first (alone) failed; their report again:\n${tail.join('\n')}`);
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
// Integration files first, the quick unit files last: the units fill in while the last long
// files run, instead of slots waiting idle on them at the end.
const isUnit = (f) => !f.endsWith('.int.test.ts');
const files = testFiles('tests')
  .filter(KINDS[kind])
  .sort((a, b) => Number(isUnit(a)) - Number(isUnit(b)) || a.localeCompare(b));
const alone = files.filter((f) => ALONE.test(f));
const shared = files.filter((f) => !ALONE.test(f));
const copy = join(mkdtempSync(join(tmpdir(), 'deepq-tests-')), 'alone.log');
const failedAlone = run(alone, 1, copy);
const failedShared = run(shared, concurrency);
if (failedAlone && existsSync(copy)) repeatFailure(copy);
rmSync(dirname(copy), { recursive: true, force: true });
process.exit(failedAlone || failedShared);
