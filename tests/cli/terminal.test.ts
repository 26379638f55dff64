// What the CLI prints of text a user or a model wrote: control characters (C0, DEL, C1) are
// shown as visible escapes, never written raw; and how `artifacts --out` maps names to paths.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planExport } from '../../cli/commands/artifacts-out.ts';
import { redraw } from '../../cli/commands/output.ts';
import { clip, displayWidth, fitLine, safeJson, safeLine, safeText } from '../../cli/terminal.ts';

const HOSTILE = '\x1b[2J\x1b]0;pwned\x07';
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const ANY_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_BUT_LAYOUT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

test('safeLine escapes every C0, DEL and C1 control, line breaks and tabs included', () => {
  assert.equal(safeLine(HOSTILE), '\\u001b[2J\\u001b]0;pwned\\u0007');
  assert.equal(safeLine('a\u009b2Jb\u0085c\u009d0;x\u009c'), 'a\\u009b2Jb\\u0085c\\u009d0;x\\u009c');
  assert.equal(safeLine('one\ntwo\r\tthree\u007f'), 'one\\ntwo\\r\\tthree\\u007f');
  assert.equal(safeLine('\u0000\u001f\u0080\u009f'), '\\u0000\\u001f\\u0080\\u009f');
  // Bidi overrides and isolates reorder what follows them on screen; the weak marks stay.
  assert.equal(safeLine('rm -rf / \u202e# ok\u2066x\u2069'), 'rm -rf / \\u202e# ok\\u2066x\\u2069');
  assert.equal(safeText('a\u202bb\n'), 'a\\u202bb\n');
  assert.deepEqual(JSON.parse(safeJson({ s: '\u202d' })), { s: '\u202d' });
  assert.doesNotMatch(safeJson({ s: '\u202d' }), /\u202d/);
  assert.equal(safeLine('\u200f\u200e\u061c'), '\u200f\u200e\u061c');
  const all = Array.from({ length: 0xa0 }, (_, i) => String.fromCharCode(i)).join('');
  assert.doesNotMatch(safeLine(all), ANY_CONTROL);
});

test('safeLine leaves ordinary text alone, non-ASCII included, and is idempotent', () => {
  for (const s of ['plain text', 'é ü ß ✓ 日本語 🙂', '└─ cycle 1  → end', 'tab-free \\u001b already escaped', '']) {
    assert.equal(safeLine(s), s);
  }
  assert.equal(safeLine(safeLine(HOSTILE)), safeLine(HOSTILE));
  // U+00A0 (no-break space) is the first character past C1: printable, kept.
  assert.equal(safeLine('a\u00a0b'), 'a\u00a0b');
});

test('safeText keeps line breaks, tabs and CRLF, and escapes every other control', () => {
  assert.equal(safeText('line 1\n\tline 2\r\nline 3'), 'line 1\n\tline 2\r\nline 3');
  assert.equal(safeText(`title\n${HOSTILE}\n`), 'title\n\\u001b[2J\\u001b]0;pwned\\u0007\n');
  // A lone CR would let what follows overwrite the line on screen.
  assert.equal(safeText('all good\rpwned'), 'all good\\rpwned');
  assert.equal(safeText('\u009b2J\u000b\u000c\u007f'), '\\u009b2J\\u000b\\u000c\\u007f');
  const all = Array.from({ length: 0xa0 }, (_, i) => String.fromCharCode(i)).join('');
  assert.doesNotMatch(safeText(all), CONTROL_BUT_LAYOUT);
  assert.doesNotMatch(safeText(all).replace(/\r\n/g, ''), /\r/);
});

test('safeJson is the same JSON value with DEL and C1 escaped as well as C0', () => {
  const value = { reason: `${HOSTILE} and \u009b2J\u007f`, n: 1, list: ['\u0085', 'ok'] };
  const json = safeJson(value);
  assert.doesNotMatch(json, ANY_CONTROL);
  assert.match(json, /\\u009b2J\\u007f/);
  assert.deepEqual(JSON.parse(json), value);
  const pretty = safeJson(value, 2);
  assert.doesNotMatch(pretty.replace(/\n/g, ''), ANY_CONTROL);
  assert.deepEqual(JSON.parse(pretty), value);
});

test('names that are not file paths are skipped; names sharing a file/directory prefix collide', () => {
  // The VFS refuses such names now; a goal stored before that may still hold them.
  const same = planExport(['b/c.md', 'b//c.md', 'b/./c.md', 'ok.md']);
  assert.deepEqual(
    same.placements.map((p) => p.rel),
    ['b/c.md', 'ok.md'],
  );
  assert.deepEqual(
    same.skipped.map((s) => s.name),
    ['b//c.md', 'b/./c.md'],
  );
  assert.deepEqual(same.collisions, []);

  const prefix = planExport(['report', 'report/z.md', 'a/b', 'a/b/c/d.md', 'a/bc.md']);
  assert.deepEqual(prefix.collisions, [
    '"report" is a file but "report/z.md" needs report/ to be a directory',
    '"a/b" is a file but "a/b/c/d.md" needs a/b/ to be a directory',
  ]);

  const fine = planExport(['a.md', 'sub/b.md', 'sub/deep/c.txt', 'sub2/b.md', 'subb.md']);
  assert.deepEqual(fine.collisions, []);
  assert.deepEqual(fine.skipped, []);
  assert.equal(fine.placements.length, 5);
});

test('names that could leave DIR are skipped, never placed', () => {
  const plan = planExport(['../x', '/etc/passwd', 'a/../../b', 'ok.md', 'evil\u0007.md']);
  assert.deepEqual(
    plan.placements.map((p) => p.name),
    ['ok.md'],
  );
  assert.equal(plan.skipped.length, 4);
});

test('a stored name with a hidden folder (report/.git/config) is skipped: git would obey that config', () => {
  // Names stored before the rule refused them: the export must not write them either.
  const plan = planExport(['report/README.md', 'report/.git/config', 'report/.git/HEAD', 'a/.env']);
  assert.deepEqual(
    plan.placements.map((p) => p.name),
    ['report/README.md'],
  );
  assert.deepEqual(
    plan.skipped.map((s) => s.name),
    ['report/.git/config', 'report/.git/HEAD', 'a/.env'],
  );
  assert.match(plan.skipped[0]!.problem, /hidden path segment \(".git"\)/);
});

test('displayWidth counts terminal columns: wide CJK and emoji two, combining marks and joiners none', () => {
  assert.equal(displayWidth('abc'), 3);
  assert.equal(displayWidth('日本語'), 6);
  assert.equal(displayWidth('🙂'), 2);
  assert.equal(displayWidth('e\u0301'), 1, 'e + combining acute');
  assert.equal(displayWidth('👨\u200d👩\u200d👧'), 2, 'one emoji ZWJ sequence');
  assert.equal(displayWidth('└─ cycle 1  → end'), 17);
  assert.equal(displayWidth(safeLine('\x1b[2J')), 9, 'an escaped control is the text shown');
});

test('fitLine cuts a line to the terminal width, whole characters, ending in …', () => {
  assert.equal(fitLine('short', 40), 'short');
  assert.equal(fitLine('x'.repeat(40), 40), 'x'.repeat(40), 'exactly the width: kept');
  assert.equal(fitLine('x'.repeat(41), 40), `${'x'.repeat(39)}…`);
  assert.equal(fitLine('日本語日本語', 7), '日本語…', 'a wide character is never split');
  assert.equal(fitLine('ab日本', 4), 'ab…');
  assert.equal(fitLine('ae\u0301bcdef', 4), 'ae\u0301b…', 'a mark stays with its letter');
  assert.equal(fitLine('x'.repeat(500), undefined), 'x'.repeat(500), 'no width known (not a terminal): kept');
  for (const cols of [2, 5, 13, 40]) {
    const line = safeLine(`goal: 日本 ${HOSTILE} 🙂 ${'word '.repeat(30)}`);
    const cut = fitLine(line, cols);
    assert.ok(displayWidth(cut) <= cols, `${cols}: ${cut}`);
    assert.doesNotMatch(cut, ANY_CONTROL);
  }
});

test('the watch redraw writes no line wider than the terminal and moves up over exactly what it wrote', () => {
  const written: string[] = [];
  const screen = { columns: 30, write: (s: string) => written.push(s) };
  const tree = [`goal: ${'long goal text '.repeat(10)}  [running]`, '└─ cycle 1', `   └─ [0] ${'日本'.repeat(20)}`];
  const rows = redraw(tree.join('\n'), 0, screen);
  assert.equal(rows, 3);
  const lines = written.join('').split('\n').slice(0, -1);
  assert.equal(lines.length, 3);
  for (const line of lines) assert.ok(displayWidth(line) <= 30, line);
  written.length = 0;
  redraw('goal: done', rows, screen);
  assert.equal(written[0], '\x1b[3F\x1b[J', 'up three rows, then clear');
});

test('clip: a reason cut at a word boundary, ending in …; short text as it is; never half a character', () => {
  const reason = 'the critic found the tests missing and the solution unreviewed, so another cycle is needed';
  assert.equal(clip(reason, 40), 'the critic found the tests missing and…');
  assert.ok([...clip(reason, 40)].length <= 40);
  assert.equal(clip('short', 40), 'short');
  // One long word: cut inside it, nothing better to do.
  assert.equal(clip('x'.repeat(50), 10), `${'x'.repeat(9)}…`);
  // Astral characters are whole code points: no lone surrogate reaches the terminal.
  assert.equal(clip('😀'.repeat(20), 5), '😀😀😀😀…');
});
