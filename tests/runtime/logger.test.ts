// Service logs on a terminal (`deepq up` shares its terminal with its services): model text in a
// logged reason or error keeps its value in the JSON, but no C1 or bidi control reaches the
// terminal raw. A real process writing to a real pipe, as a service does.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

const HOSTILE = 'role \u009b2J\u009b31mPWNED\u202etxt.exe \u0085 del\u007f \u2066iso\u2069 \u001b[2J ✓';

test('C1 and bidi controls in any logged field are escaped, the JSON value unchanged', () => {
  const script = `
    import { createLogger } from './shared/runtime/logger.ts';
    const log = createLogger('info', { service: 'test' });
    const text = ${JSON.stringify(HOSTILE)};
    log.warn({ reason: text, nested: { deep: [text] }, err: new Error(text) }, 'planning failed: ' + text);
  `;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: new URL('../..', import.meta.url),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  assert.doesNotMatch(r.stdout, /[\u007f-\u009f\u202a-\u202e\u2066-\u2069\u001b]/, 'a control reached the output raw');
  const line = JSON.parse(r.stdout.trim());
  assert.equal(line.reason, HOSTILE);
  assert.deepEqual(line.nested.deep, [HOSTILE]);
  assert.equal(line.msg, `planning failed: ${HOSTILE}`);
  assert.equal(line.err.message, HOSTILE);
});
