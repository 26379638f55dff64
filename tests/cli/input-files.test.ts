// `enqueue --file` paths: what a path is (a folder, missing) is said before what its name would be.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readInputFiles } from '../../cli/input-files.ts';
import { tempDir } from '../../testing/temp-dir.ts';

test('a folder given as --file is named as one, whatever its name (".", "", a path to one)', () => {
  const cwd = tempDir('deepq-input-');
  mkdirSync(join(cwd, 'docs'));
  writeFileSync(join(cwd, 'docs', 'a.md'), 'a');
  for (const path of ['.', '', 'docs', join(cwd, 'docs')])
    assert.throws(
      () => readInputFiles([path], 1000, cwd),
      (err: Error) => err.message === `--file ${JSON.stringify(path)}: is a folder: name its files`,
      path,
    );
  assert.deepEqual(readInputFiles(['docs/a.md'], 1000, cwd), [{ name: 'docs/a.md', content: 'a' }]);
  assert.throws(() => readInputFiles(['nope.md'], 1000, cwd), /--file "nope\.md": cannot be read \(ENOENT\)/);
});
