// The glob matcher of list_files and grep: the usual syntax over artifact names, clear errors
// for malformed globs, and no backtracking blow-up however many stars a pattern has.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileGlob, GLOB_MAX_CHARS } from '../../shared/agent/tools.ts';

test('*, **, ?, sets, braces and escapes match as documented', () => {
  const cases: [glob: string, name: string, matches: boolean][] = [
    ['src/**/*.py', 'src/a.py', true],
    ['src/**/*.py', 'src/x/y/a.py', true],
    ['src/**/*.py', 'srcx/a.py', false],
    ['src/**/*.py', 'src/a.pyc', false],
    ['src/**/*.py', 'lib/src/a.py', false],
    ['*.py', 'a.py', true],
    ['*.py', 'd/a.py', false],
    ['**/*.py', 'a.py', true],
    ['**/*.py', 'a/b/c.py', true],
    ['**', 'a/b/c', true],
    ['docs/**', 'docs/a/b.md', true],
    ['docs/**', 'docs', false],
    ['x/**/y', 'x/y', true],
    ['x/**/y', 'x/a/b/y', true],
    ['x/**/y', 'x/a/b/yy', false],
    ['a**b', 'axxb', true],
    ['a**b', 'a/b', false],
    ['*.{md,txt}', 'a.txt', true],
    ['*.{md,txt}', 'a.py', false],
    ['{a,b/{c,d}}.md', 'b/d.md', true],
    ['{a,b/{c,d}}.md', 'b/e.md', false],
    ['a[0-9].md', 'a5.md', true],
    ['a[!0-9].md', 'a5.md', false],
    ['a[^0-9].md', 'ab.md', true],
    ['a[!x].md', 'a/.md', false],
    ['[]a]', ']', true],
    ['a?c', 'abc', true],
    ['a?c', 'a/c', false],
    ['a\\*b', 'a*b', true],
    ['a\\*b', 'axb', false],
    ['report.md', 'report.md', true],
    ['report.md', 'xreport.md', false],
    ['report.md', 'report.mdx', false],
    ['*', '.hidden', true],
    ['src/*', 'src/.env', true],
  ];
  for (const [glob, name, matches] of cases) {
    assert.equal(compileGlob(glob)(name), matches, `${glob} vs ${name}`);
  }
});

test('a malformed glob is a clear error', () => {
  const bad: [string, RegExp][] = [
    ['', /glob is empty/],
    ['a{b', /"\{" at 2 without its "\}"/],
    ['[ab', /"\[" at 1 without its "\]"/],
    ['[z-a]', /backwards range \[z-a\]/],
    ['x'.repeat(GLOB_MAX_CHARS + 1), /glob is 501 chars \(max 500\)/],
    ['{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}', /more than 64 alternatives/],
    // 64 alternatives of 476 tokens: seconds per call over a goal's 500 names.
    [
      `${'{a,b}'.repeat(6)}${'*?'.repeat(235)}`,
      /glob is too complex: 30464 tokens across its alternatives \(max 256\)/,
    ],
  ];
  for (const [glob, re] of bad) assert.throws(() => compileGlob(glob), re, glob.slice(0, 40));
});

test('many stars against a long name stay fast (no backtracking)', () => {
  const match = compileGlob(`${'*a'.repeat(40)}*b`);
  const name = 'a'.repeat(199);
  const started = performance.now();
  for (let i = 0; i < 500; i++) assert.equal(match(name), false);
  assert.ok(performance.now() - started < 2000, `${performance.now() - started} ms`);
});
